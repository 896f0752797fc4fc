# The tls driver needs OpenSSL 3 (libssl-dev, pkg-config openssl). Without it the driver is
# left out of the library (cx_driver_for("tls://...") then says so) and its tests skip with
# the reason.
ifneq ($(shell pkg-config --exists 'openssl >= 3.0' && echo yes),yes)
LIB_C := $(filter-out src/transport/tls/%,$(LIB_C))
CFLAGS += -DCX_NO_TLS
else
CFLAGS += $(shell pkg-config --cflags openssl) -DCX_HAVE_TLS
LDLIBS += $(shell pkg-config --libs openssl)
endif
