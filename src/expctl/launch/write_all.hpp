#pragma once
/// Writing to a pipe whose reader may have gone, without dying of SIGPIPE.

#include <string_view>

namespace expctl::launch {

/// Writes all of `data` to `fd`; false when it cannot (EPIPE: the reader has gone). SIGPIPE is
/// blocked for the calling thread during the write and a pending one consumed, so a vanished
/// reader cannot kill this process through it.
bool write_all_ignoring_sigpipe(int fd, std::string_view data);

}  // namespace expctl::launch
