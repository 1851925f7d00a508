#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which Swift cannot import.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }

// Memory statistics (on by default) take a global mutex around every allocation SQLite makes;
// nothing here reads them. sqlite3_config is variadic, which Swift cannot call. It only takes
// effect before SQLite initializes (afterwards it returns SQLITE_MISUSE and changes nothing).
static inline int csqlite_disable_memory_statistics(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }
