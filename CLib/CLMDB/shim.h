// The one C header Hoard sees: the system liblmdb (Debian: liblmdb-dev, Homebrew: lmdb).
// Nothing of LMDB's source is vendored; the package links the system library.
#include <lmdb.h>
