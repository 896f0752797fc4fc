# Builds the dpdk driver's benchmark pair: build/dpdk_bench (the Conflux dpdk link, against
# dataplane/build/libconflux.a) and build/dpdk_pingpong (bare DPDK, its peer: dpdk_pingpong.c,
# the client and main; dpdk_bare.c, port and frames; dpdk_bare_server.c; dpdk_bare_hot.c, the
# hot-spot). Used by
# run.sh (make -f dpdk.mk); without DPDK (pkg-config libdpdk) it builds nothing.
BUILD ?= build
DP := ../../dataplane
HAVE_DPDK := $(shell pkg-config --exists libdpdk && echo yes)
CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Werror -I$(DP)/src -DCX_HAVE_DPDK \
          $(shell pkg-config --cflags libdpdk 2>/dev/null)
DPDK_LIBS := $(shell pkg-config --libs libdpdk 2>/dev/null)
LIBCX ?= $(DP)/build/libconflux.a

ifeq ($(HAVE_DPDK),yes)
all: $(BUILD)/dpdk_bench $(BUILD)/dpdk_pingpong
else
all:
	@echo "dpdk.mk: DPDK not installed (pkg-config libdpdk), nothing to build" >&2
endif

$(DP)/build/libconflux.a: FORCE
	$(MAKE) -C $(DP) -j2 build/libconflux.a

$(BUILD)/dpdk_bench: dpdk_bench.c $(LIBCX)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -o $@ dpdk_bench.c $(LIBCX) $(shell $(MAKE) -s -C $(DP) print-ldlibs) -pthread -lm

BARE := dpdk_pingpong.c dpdk_bare.c dpdk_bare_server.c dpdk_bare_hot.c

$(BUILD)/dpdk_pingpong: $(BARE) dpdk_bare.h
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -o $@ $(BARE) $(DPDK_LIBS)

.PHONY: all FORCE
