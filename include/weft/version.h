// The version of the weft library these headers belong to.
#pragma once
#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
#define WEFT_VERSION_STRING "0.1.0"
