// The system liblmdb, called directly by the benchmarks' baselines.
#include <lmdb.h>
