# The ucx driver needs UCX (libucx-dev); without it the driver is left out of the library
# and its tests skip with the reason.
ifneq ($(shell pkg-config --exists ucx && echo yes),yes)
LIB_C := $(filter-out src/transport/ucx/%,$(LIB_C))
CFLAGS += -DCX_NO_UCX
else
CFLAGS += $(shell pkg-config --cflags ucx) -DCX_HAVE_UCX
LDLIBS += $(shell pkg-config --libs ucx)
endif
