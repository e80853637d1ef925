// weft: collective communication for distributed training. Include this one header.
#pragma once
#include "weft/communicator.h"
#include "weft/options.h"
#include "weft/status.h"
#include "weft/store.h"
#include "weft/types.h"
#include "weft/version.h"
#include "weft/work.h"
