// The public header compiles as C++ too (its declarations are extern "C"): compile-only.
#include "conflux.h"

int main() { return conflux_version()[0] == '0' && CONFLUX_VERSION_MAJOR == 0 ? 0 : 1; }
