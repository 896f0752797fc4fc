# The conversion kernels (cx_conv.c) are compiled with -O3 -fno-trapping-math: GCC's -O2
# vectorises only loops whose trip count is a known multiple of the vector width ("very
# cheap" cost model), and these loops run over arrays of any length; with trapping math a
# conversion that may raise an FP exception (double -> float overflow) is never executed
# speculatively, so the range rules stay branches and the loop stays scalar. The results
# are the same (no code here reads the FP exception flags). Only this object; the rest,
# the reference cx_conv_ref.c included, stays at $(OPT).
$(BUILD)/obj/src/format/cx_conv.o: private CFLAGS += -O3 -fno-trapping-math
