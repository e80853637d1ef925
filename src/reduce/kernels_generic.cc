// Reduction kernels for any CPU: compiled with the project's baseline flags plus -O3 (see
// CMakeLists.txt); on x86-64 that is SSE2, and fp16 is converted in software.
#include "reduce/kernels.h"

namespace weft::reduce_detail {
namespace {
constexpr KernelTable kGenericTable = make_table<SoftHalfConv>("generic");
}  // namespace

const KernelTable& kernels_generic() { return kGenericTable; }

}  // namespace weft::reduce_detail
