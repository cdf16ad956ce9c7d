// Names the calling thread for `top -H`, `perf` and debuggers ("postal-io", "postal-w0", …).
#pragma once

#include <string_view>

namespace postal::runtime {

// Linux keeps at most 15 bytes of a thread's name; longer names are cut there.
void name_this_thread(std::string_view name);

}  // namespace postal::runtime
