// Compiled against the passes layer's headers only (core/CMakeLists.txt: tripy_layer_probe), by
// the test layers_build_refuses_upward_include, which passes when this fails to compile because
// the compiler's header cannot be found: proof that the build itself refuses an include of a layer
// above. The first include is the layer's own and must be found.
#include "flat/passes/passes.h"
#include "compiler/compile.h"
