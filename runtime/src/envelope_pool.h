// EnvelopePool: where MessageEnvelope's operator new/delete get their blocks (runtime internal).
//
// Each thread keeps a free list of envelope-sized blocks (capped at kCap). An envelope is often
// freed on another thread than the one that made it (a sender outside the workers, a request
// answered elsewhere), so one thread's list fills while another's stays empty: past the cap a
// thread hands kBatch blocks at once to a process-wide depot, and a thread whose list is empty
// takes a batch from there before it asks the allocator. A block therefore crosses threads in
// batches under one lock instead of one by one through the allocator's cross-thread free lists
// (which the allocating thread walks block by block to take them back). The depot is bounded
// (kDepotBatches); past it blocks go back to the allocator.
//
// The thread's list is trivially destructible state plus a flag, so an envelope freed during
// thread or process exit, after the thread_locals are gone, goes straight to the allocator; the
// depot is never destroyed.
#pragma once

#include <cstddef>

namespace postal::runtime::internal {

inline constexpr size_t kEnvelopePoolCap = 4096;
inline constexpr size_t kEnvelopeBatch = 256;
inline constexpr size_t kEnvelopeDepotBatches = 64;

// `size` is the size operator new was asked for; only `block_size` blocks are pooled.
void* envelope_alloc(size_t size, size_t block_size);
void envelope_free(void* p, size_t size, size_t block_size) noexcept;

}  // namespace postal::runtime::internal
