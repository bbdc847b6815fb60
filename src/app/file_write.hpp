#pragma once
// Files ringbench writes beside its output (--json, the hang guard's heartbeat): written under a
// new name in the same directory (mkstemp: O_CREAT | O_EXCL, so never through a planted link
// and never over another file), then renamed over the path. Only nothing, a regular file or
// (when allowed) a symbolic link at the path is replaced: a FIFO, a device, a socket or a
// directory there is someone else's and stays as it is.
#include <string>

namespace rb {

// "" when `path` may be replaced (nothing there, a regular file, or a link when `replace_link`),
// else why not, naming the path and what it is.
std::string refusal_to_replace(const std::string& path, bool replace_link, const std::string& what);

// Writes `text` to `path` as above (mode 0644); throws std::runtime_error naming the path and
// the OS's reason. `what` names the file in messages ("--json file").
void write_file_replacing(const std::string& path, const std::string& text, bool replace_link,
                          const std::string& what);

}  // namespace rb
