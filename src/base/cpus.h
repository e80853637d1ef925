// How many CPUs this job's processes may use: the one rule every module decides by (whether
// waiting ranks may spin, whether shared memory pays between ranks of one machine).
#pragma once

namespace weft {

// The CPUs this process may run on (its affinity mask, as taskset, cgroups' cpusets and
// `docker --cpuset-cpus` set it), at least 1. Falls back to the online CPUs when the mask
// cannot be read.
int usable_cpus();

}  // namespace weft
