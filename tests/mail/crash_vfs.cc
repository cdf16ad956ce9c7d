#include "crash_vfs.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sqlite3.h>

namespace postal::mail::testing {
namespace {

constexpr const char* kName = "postal-crash";

std::atomic<bool> g_cut{false};
std::atomic<uint64_t> g_epoch{0};  // bumped by power_cut: pending writes of older epochs are gone
sqlite3_vfs* g_real = nullptr;
sqlite3_vfs g_vfs;

// One pending change: a write, or a truncation when `truncate` is set.
struct Op {
  sqlite3_int64 offset = 0;
  std::string data;
  bool truncate = false;
};

// What the OS holds of one file and the disk does not yet: shared by every handle of the file,
// as the page cache is.
struct Cache {
  std::mutex mu;
  std::vector<Op> pending;
  uint64_t epoch = 0;
};

std::mutex g_caches_mu;
std::map<std::string, std::weak_ptr<Cache>> g_caches;

std::shared_ptr<Cache> cache_for(const char* name) {
  if (name == nullptr) return std::make_shared<Cache>();  // a temp file: its own
  std::lock_guard<std::mutex> lock(g_caches_mu);
  std::shared_ptr<Cache> c = g_caches[name].lock();
  if (c == nullptr) {
    c = std::make_shared<Cache>();
    c->epoch = g_epoch.load();
    g_caches[name] = c;
  }
  return c;
}

struct File {
  sqlite3_file base;  // must be first
  sqlite3_file* real;
  std::shared_ptr<Cache>* cache;
};

File* as(sqlite3_file* f) { return reinterpret_cast<File*>(f); }

// The file's cache, locked, without what a power cut erased.
struct Locked {
  explicit Locked(File* f) : cache(**f->cache), lock(cache.mu) {
    if (cache.epoch != g_epoch.load()) {
      cache.pending.clear();
      cache.epoch = g_epoch.load();
    }
  }
  Cache& cache;
  std::lock_guard<std::mutex> lock;
};

int real_size(File* f, sqlite3_int64* size) { return f->real->pMethods->xFileSize(f->real, size); }

int x_close(sqlite3_file* file) {
  File* f = as(file);
  const int rc = f->real->pMethods->xClose(f->real);
  sqlite3_free(f->real);
  delete f->cache;
  return rc;
}

int x_read(sqlite3_file* file, void* buf, int amount, sqlite3_int64 offset) {
  File* f = as(file);
  Locked c(f);
  std::memset(buf, 0, amount);
  sqlite3_int64 size = 0;
  real_size(f, &size);
  if (offset < size) {
    const int n = static_cast<int>(std::min<sqlite3_int64>(amount, size - offset));
    const int rc = f->real->pMethods->xRead(f->real, buf, n, offset);
    if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) return rc;
  }
  for (const Op& op : c.cache.pending) {
    if (op.truncate) {
      size = std::min(size, op.offset);
      if (op.offset < offset + amount) {
        const sqlite3_int64 from = std::max(op.offset, offset);
        std::memset(static_cast<char*>(buf) + (from - offset), 0, offset + amount - from);
      }
      continue;
    }
    const sqlite3_int64 end = op.offset + static_cast<sqlite3_int64>(op.data.size());
    size = std::max(size, end);
    const sqlite3_int64 lo = std::max(op.offset, offset);
    const sqlite3_int64 hi = std::min(end, offset + amount);
    if (lo < hi) {
      std::memcpy(static_cast<char*>(buf) + (lo - offset), op.data.data() + (lo - op.offset),
                  hi - lo);
    }
  }
  return offset + amount <= size ? SQLITE_OK : SQLITE_IOERR_SHORT_READ;
}

int x_write(sqlite3_file* file, const void* buf, int amount, sqlite3_int64 offset) {
  File* f = as(file);
  if (g_cut.load()) return SQLITE_OK;  // the power is off: nothing reaches the disk
  Locked c(f);
  c.cache.pending.push_back(Op{offset, std::string(static_cast<const char*>(buf), amount), false});
  return SQLITE_OK;
}

int x_truncate(sqlite3_file* file, sqlite3_int64 size) {
  File* f = as(file);
  if (g_cut.load()) return SQLITE_OK;
  Locked c(f);
  c.cache.pending.push_back(Op{size, {}, true});
  return SQLITE_OK;
}

int x_sync(sqlite3_file* file, int flags) {
  File* f = as(file);
  if (g_cut.load()) return SQLITE_OK;
  Locked c(f);
  for (const Op& op : c.cache.pending) {
    const int rc = op.truncate
                       ? f->real->pMethods->xTruncate(f->real, op.offset)
                       : f->real->pMethods->xWrite(f->real, op.data.data(),
                                                   static_cast<int>(op.data.size()), op.offset);
    if (rc != SQLITE_OK) return rc;
  }
  c.cache.pending.clear();
  return f->real->pMethods->xSync(f->real, flags);
}

int x_file_size(sqlite3_file* file, sqlite3_int64* out) {
  File* f = as(file);
  Locked c(f);
  sqlite3_int64 size = 0;
  if (int rc = real_size(f, &size); rc != SQLITE_OK) return rc;
  for (const Op& op : c.cache.pending) {
    size = op.truncate ? op.offset
                       : std::max(size, op.offset + static_cast<sqlite3_int64>(op.data.size()));
  }
  *out = size;
  return SQLITE_OK;
}

// Locks, control and shared memory go to the real file unchanged.
int x_lock(sqlite3_file* f, int l) { return as(f)->real->pMethods->xLock(as(f)->real, l); }
int x_unlock(sqlite3_file* f, int l) { return as(f)->real->pMethods->xUnlock(as(f)->real, l); }
int x_check(sqlite3_file* f, int* out) {
  return as(f)->real->pMethods->xCheckReservedLock(as(f)->real, out);
}
int x_control(sqlite3_file* f, int op, void* arg) {
  return as(f)->real->pMethods->xFileControl(as(f)->real, op, arg);
}
int x_sector(sqlite3_file* f) { return as(f)->real->pMethods->xSectorSize(as(f)->real); }
int x_device(sqlite3_file* f) { return as(f)->real->pMethods->xDeviceCharacteristics(as(f)->real); }
int x_shm_map(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
  return as(f)->real->pMethods->xShmMap(as(f)->real, page, size, extend, out);
}
int x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  return as(f)->real->pMethods->xShmLock(as(f)->real, offset, n, flags);
}
void x_shm_barrier(sqlite3_file* f) { as(f)->real->pMethods->xShmBarrier(as(f)->real); }
int x_shm_unmap(sqlite3_file* f, int del) {
  return as(f)->real->pMethods->xShmUnmap(as(f)->real, del);
}

const sqlite3_io_methods kMethods = {
    2,          x_close,       x_read,      x_write,   x_truncate, x_sync,   x_file_size,
    x_lock,     x_unlock,      x_check,     x_control, x_sector,   x_device, x_shm_map,
    x_shm_lock, x_shm_barrier, x_shm_unmap, nullptr,   nullptr};

int x_open(sqlite3_vfs*, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  File* f = as(file);
  f->base.pMethods = nullptr;
  f->real = static_cast<sqlite3_file*>(sqlite3_malloc(g_real->szOsFile));
  if (f->real == nullptr) return SQLITE_NOMEM;
  std::memset(f->real, 0, g_real->szOsFile);
  const int rc = g_real->xOpen(g_real, name, f->real, flags, out_flags);
  if (rc != SQLITE_OK) {
    if (f->real->pMethods != nullptr) f->real->pMethods->xClose(f->real);
    sqlite3_free(f->real);
    return rc;
  }
  f->cache = new std::shared_ptr<Cache>(cache_for(name));
  f->base.pMethods = &kMethods;
  return SQLITE_OK;
}

int x_delete(sqlite3_vfs*, const char* name, int sync_dir) {
  if (g_cut.load()) return SQLITE_OK;
  return g_real->xDelete(g_real, name, sync_dir);
}
int x_access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return g_real->xAccess(g_real, name, flags, out);
}
int x_full_pathname(sqlite3_vfs*, const char* name, int n, char* out) {
  return g_real->xFullPathname(g_real, name, n, out);
}
int x_randomness(sqlite3_vfs*, int n, char* out) { return g_real->xRandomness(g_real, n, out); }
int x_sleep(sqlite3_vfs*, int us) { return g_real->xSleep(g_real, us); }
int x_current_time(sqlite3_vfs*, double* out) { return g_real->xCurrentTime(g_real, out); }
int x_last_error(sqlite3_vfs*, int n, char* out) { return g_real->xGetLastError(g_real, n, out); }

}  // namespace

const char* CrashVfs::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_real = sqlite3_vfs_find(nullptr);
    std::memset(&g_vfs, 0, sizeof(g_vfs));
    g_vfs.iVersion = 1;
    g_vfs.szOsFile = sizeof(File);
    g_vfs.mxPathname = g_real->mxPathname;
    g_vfs.zName = kName;
    g_vfs.xOpen = x_open;
    g_vfs.xDelete = x_delete;
    g_vfs.xAccess = x_access;
    g_vfs.xFullPathname = x_full_pathname;
    g_vfs.xDlOpen = nullptr;
    g_vfs.xRandomness = x_randomness;
    g_vfs.xSleep = x_sleep;
    g_vfs.xCurrentTime = x_current_time;
    g_vfs.xGetLastError = x_last_error;
    sqlite3_vfs_register(&g_vfs, 0);
  });
  return kName;
}

void CrashVfs::power_cut() {
  g_cut.store(true);
  g_epoch.fetch_add(1);
}

void CrashVfs::restore() { g_cut.store(false); }

}  // namespace postal::mail::testing
