#pragma once
/// Loading LibTorch without the libraries it never uses. Debian's libtorch_cpu names 45
/// libraries as DT_NEEDED, among them OpenCV, FFmpeg, ZeroMQ, LevelDB and LMDB, and takes not one
/// symbol from them; they bring in about 225 more (Qt, GStreamer, GDAL, ICU, ...). Mapping,
/// relocating and initialising those is about half of what every rank pays to load the plugin.
///
/// At build time, expctl_torch_trim (train/trim_tool.cpp, driven by cmake/torch_trim.sh) loads
/// the plugin under the dynamic linker's own trace (LD_DEBUG=bindings), keeps every object that
/// an object kept binds a symbol to (from the plugin and the program on; see IsVague for the
/// exception), and writes one empty
/// stand-in library (torch-stubs/<soname>) for each name a kept object needs that no kept object
/// provides. It then loads the plugin again with the stand-ins and keeps them only when every
/// binding of every kept object is the same as in the whole load: each symbol from the same file,
/// or, for an inline or template function, from another copy of it; so the trimmed process runs
/// the same code as the whole one.
///
/// At run time, the plugin loader opens the stand-ins first; the dynamic linker then takes them
/// for the libraries of those names. It does so only while nothing the analysis relied on has
/// changed: the build, LD_LIBRARY_PATH, no LD_PRELOAD, and the size and modification time of
/// every kept library. Otherwise, or when a trimmed load fails, it loads LibTorch whole.
/// EXPCTL_TORCH_TRIM=off (or 0, no, false) always loads it whole. Torch-free.

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace expctl::train::trim {

/// What the build's analysis found, in torch-stubs/manifest.json beside the plugin.
struct Manifest {
  std::string build_id;                        ///< train::plugin::build_id() of the build
  std::string ld_library_path;                 ///< LD_LIBRARY_PATH during the analysis
  std::map<std::string, std::string> kept;     ///< path -> util::file_identity of each kept object
  std::vector<std::string> stubs;              ///< sonames replaced by empty stand-ins
};

std::string format_manifest(const Manifest& manifest);
/// nullopt when `text` is not a manifest.
std::optional<Manifest> parse_manifest(const std::string& text);

/// <dir of plugin>/torch-stubs: the stand-ins and manifest.json.
std::filesystem::path stub_directory(const std::filesystem::path& plugin);

/// What the loader does for the plugin at `plugin`: the stand-ins to open first (none: load
/// whole) and, when a manifest is there but cannot be used, why (for a debug line).
struct Plan {
  std::vector<std::filesystem::path> stubs;
  std::string whole_because;
};
Plan plan(const std::filesystem::path& plugin);

// The build-time analysis.

/// One line of LD_DEBUG=bindings: object `from` took `symbol` from object `to`.
struct Binding {
  std::string from;
  std::string to;
  std::string symbol;
  auto operator<=>(const Binding&) const = default;
};
std::set<Binding> parse_bindings(std::istream& trace);

/// A loaded object as the dynamic linker holds it.
struct Object {
  std::string path;
  std::string soname;
  std::string identity;
  std::vector<std::string> needed;
};

/// Whether a binding's symbol is a vague-linkage definition in the object it was taken from
/// (weak or unique: an inline function, a template instance, their typeinfo and statics). Every
/// object that uses one carries its own copy of the same source, and the dynamic linker takes
/// the first copy in the lookup scope, wherever it is (Debian's libdnnl takes
/// std::vector<int>::reserve from OpenCV's videoio). Such a binding does not keep its object.
using IsVague = std::function<bool(const Binding&)>;

/// The objects reached from `roots` by following the bindings that are not vague, each root's
/// own included.
std::set<std::string> bound_closure(const std::set<Binding>& bindings, const std::set<std::string>& roots,
                                    const IsVague& is_vague);

/// The manifest for a whole load: stubs = the names that the objects of bound_closure(roots)
/// need and none of them answers to (by soname or file name); kept = those objects with a file,
/// less the roots (the plugin and the program, which the build id stands for).
Manifest make_manifest(const std::vector<Object>& objects, const std::set<Binding>& bindings,
                       const std::set<std::string>& roots, const IsVague& is_vague);

/// The first symbol that one of `objects` binds differently in the whole and the trimmed load,
/// or nullopt. A vague symbol may come from another copy when both copies are vague; anything
/// else must come from the same file, or the trimmed process could run other code.
std::optional<std::string> first_difference(const std::set<Binding>& whole, const std::set<Binding>& trimmed,
                                            const std::set<std::string>& objects, const IsVague& is_vague);

}  // namespace expctl::train::trim
