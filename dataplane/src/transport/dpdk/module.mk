# The dpdk driver needs DPDK (libdpdk-dev, pkg-config libdpdk). Without it the driver is left
# out of the library (only its DPDK-free parts stay: the frame layout, cx_dpdk_wire.c, and
# the settings, cx_dpdk_conf.c), CX_NO_DPDK is defined and its tests skip with the reason.
# DPDK's compile flags (-include rte_config.h, -march) apply only to this folder's objects
# and test, through private target-specific variables (not inherited by the library objects
# the test depends on). The link flags go
# to everything that links the library: shared DPDK libraries, whose PMDs (memif,
# af_packet, af_xdp, ...) the EAL loads as plugins.
ifneq ($(shell pkg-config --exists libdpdk && echo yes),yes)
LIB_C := $(filter-out $(filter-out src/transport/dpdk/cx_dpdk_wire.c src/transport/dpdk/cx_dpdk_conf.c,$(filter src/transport/dpdk/%,$(LIB_C))),$(LIB_C))
CFLAGS += -DCX_NO_DPDK
else
CX_DPDK_CFLAGS := $(shell pkg-config --cflags libdpdk)
$(BUILD)/obj/src/transport/dpdk/%.o: private CFLAGS += $(CX_DPDK_CFLAGS)
$(BUILD)/test/transport/dpdk/%: private CFLAGS += $(CX_DPDK_CFLAGS)
CFLAGS += -DCX_HAVE_DPDK
LDLIBS += $(shell pkg-config --libs libdpdk)
endif
