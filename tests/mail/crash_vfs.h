// CrashVfs: a SQLite VFS for tests that loses, at a simulated power cut, every write not yet
// synced — what the disk keeps of a file is what was written before the file's last xSync.
//
// It wraps the default VFS. Each file's writes and truncations are kept in memory, in order, and
// reads see them; `xSync` applies them to the real file. `power_cut()` drops everything pending
// and ignores every later write and sync, so the connections still open can be closed without
// touching the disk; the store is then reopened with the ordinary VFS to see what survived.
// (The `-shm` index is shared memory and is rebuilt from the WAL when the store is reopened.)
#pragma once

#include <string>

namespace postal::mail::testing {

class CrashVfs {
 public:
  // Registers the VFS once (not as the default); its name, for SqliteStoreOptions::vfs.
  static const char* install();
  // Discards every unsynced write; from now on writes and syncs are dropped.
  static void power_cut();
  // Back to normal operation for the next test (pending state is already gone).
  static void restore();
};

}  // namespace postal::mail::testing
