// Symbol visibility for the weft shared library: everything is hidden unless marked WEFT_API.
#pragma once
#define WEFT_API [[gnu::visibility("default")]]
