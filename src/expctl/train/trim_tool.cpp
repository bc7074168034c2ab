// expctl_torch_trim: the build-time half of train/load_trim.hpp, run by cmake/torch_trim.sh
// after every link of the plugin; never installed.
//
//   expctl_torch_trim load OBJECTS PLUGIN [STUB...]   open the stand-ins, then the plugin, and
//                                                      write every loaded object to OBJECTS
//   expctl_torch_trim plan OBJECTS TRACE MANIFEST PLUGIN
//                                                      write the manifest for a whole load and
//                                                      print its stand-ins' sonames, one a line
//   expctl_torch_trim verify OBJECTS MANIFEST WHOLE TRIMMED PLUGIN
//                                                      exit 1, naming it, on a symbol bound
//                                                      otherwise in the two traces
//   expctl_torch_trim untrim MANIFEST                 drop the manifest's stand-ins
// TRACE, WHOLE and TRIMMED are LD_DEBUG=bindings output of `load`. plan and verify load the
// plugin whole themselves, to read which symbols are vague in which object.
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/train/load_trim.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/cache_dir.hpp"

namespace {

using nlohmann::json;
using namespace expctl::train;

template <typename T>
const T* rebased(const link_map& map, ElfW(Addr) address) {
  // glibc rebases the dynamic section in place, except a read-only one (the vDSO's).
  return reinterpret_cast<const T*>(address < map.l_addr ? map.l_addr + address : address);
}

// What the tool reads of an object's dynamic section.
struct Dynamic {
  const char* strings = nullptr;  // DT_STRTAB
  const ElfW(Sym)* symbols = nullptr;
  const ElfW(Word)* gnu_hash = nullptr;
  const ElfW(Word)* sysv_hash = nullptr;
  ElfW(Xword) soname = 0;  // offsets into strings
  std::vector<ElfW(Xword)> needed;
};

Dynamic dynamic_of(const link_map& map) {
  Dynamic dynamic;
  for (const ElfW(Dyn)* entry = map.l_ld; entry != nullptr && entry->d_tag != DT_NULL; ++entry) {
    switch (entry->d_tag) {
      case DT_STRTAB: dynamic.strings = rebased<char>(map, entry->d_un.d_ptr); break;
      case DT_SYMTAB: dynamic.symbols = rebased<ElfW(Sym)>(map, entry->d_un.d_ptr); break;
      case DT_GNU_HASH: dynamic.gnu_hash = rebased<ElfW(Word)>(map, entry->d_un.d_ptr); break;
      case DT_HASH: dynamic.sysv_hash = rebased<ElfW(Word)>(map, entry->d_un.d_ptr); break;
      case DT_SONAME: dynamic.soname = entry->d_un.d_val; break;
      case DT_NEEDED: dynamic.needed.push_back(entry->d_un.d_val); break;
      default: break;
    }
  }
  return dynamic;
}

// Strings of an object's dynamic section: (DT_SONAME, every DT_NEEDED).
std::pair<std::string, std::vector<std::string>> dynamic_names(const link_map& map) {
  const Dynamic dynamic = dynamic_of(map);
  std::pair<std::string, std::vector<std::string>> names;
  if (dynamic.strings != nullptr) {
    names.first = dynamic.soname != 0 ? dynamic.strings + dynamic.soname : "";
    for (const auto offset : dynamic.needed) {
      names.second.emplace_back(dynamic.strings + offset);
    }
  }
  return names;
}

// The number of entries in an object's dynamic symbol table, from its hash table (the dynamic
// section gives no count).
size_t symbol_count(const ElfW(Word) * gnu_hash, const ElfW(Word) * sysv_hash) {
  if (gnu_hash == nullptr) {
    return sysv_hash != nullptr ? sysv_hash[1] : 0;
  }
  const ElfW(Word) buckets = gnu_hash[0], offset = gnu_hash[1], bloom_words = gnu_hash[2];
  const auto* bucket = reinterpret_cast<const ElfW(Word)*>(reinterpret_cast<const ElfW(Addr)*>(gnu_hash + 4) + bloom_words);
  const ElfW(Word)* chain = bucket + buckets;
  ElfW(Word) last = 0;
  for (ElfW(Word) index = 0; index < buckets; ++index) {
    last = std::max(last, bucket[index]);
  }
  if (last < offset) {
    return offset;
  }
  while ((chain[last - offset] & 1U) == 0) {
    ++last;
  }
  return last + 1;
}

// The names of the weak and unique symbols an object defines.
std::set<std::string> vague_symbols(const link_map& map) {
  const Dynamic dynamic = dynamic_of(map);
  std::set<std::string> names;
  const bool readable = dynamic.strings != nullptr && dynamic.symbols != nullptr;
  const size_t count = readable ? symbol_count(dynamic.gnu_hash, dynamic.sysv_hash) : 0;
  for (size_t index = 0; index < count; ++index) {
    const ElfW(Sym)& symbol = dynamic.symbols[index];
    const auto binding = ELF64_ST_BIND(symbol.st_info);
    if (symbol.st_shndx != SHN_UNDEF && (binding == STB_WEAK || binding == STB_GNU_UNIQUE)) {
      names.emplace(dynamic.strings + symbol.st_name);
    }
  }
  return names;
}

// The first object of the process (the program), from any handle.
link_map* first_object(void* handle) {
  link_map* map = nullptr;
  ::dlinfo(handle, RTLD_DI_LINKMAP, &map);
  while (map->l_prev != nullptr) {
    map = map->l_prev;
  }
  return map;
}

// The first object of a whole load of the plugin, which stays loaded.
link_map* whole_load(const std::string& plugin) {
  void* handle = ::dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw std::runtime_error(::dlerror());
  }
  return first_object(handle);
}

// trim::IsVague over a whole load of the plugin in this process, each object read once.
trim::IsVague vague_in_whole_load(const std::string& plugin) {
  auto objects = std::make_shared<std::map<std::string, const link_map*>>();
  for (const link_map* map = whole_load(plugin); map != nullptr; map = map->l_next) {
    objects->emplace(map->l_name, map);
  }
  auto read = std::make_shared<std::map<std::string, std::set<std::string>>>();
  return [objects, read](const trim::Binding& binding) {
    auto found = read->find(binding.to);
    if (found == read->end()) {
      const auto object = objects->find(binding.to);
      found = read->emplace(binding.to, object != objects->end() ? vague_symbols(*object->second)
                                                                  : std::set<std::string>{}).first;
    }
    return found->second.contains(binding.symbol);
  };
}

json loaded_objects(void* handle, const std::string& program) {
  json objects = json::array();
  for (const link_map* map = first_object(handle); map != nullptr; map = map->l_next) {
    const std::string path = *map->l_name != '\0' ? map->l_name : program;  // LD_DEBUG's names
    auto [soname, needed] = dynamic_names(*map);
    const bool is_program = *map->l_name == '\0';
    objects.push_back({{"path", path}, {"soname", soname}, {"needed", needed},
                       {"identity", is_program ? "" : expctl::util::file_identity(path)}});
  }
  return objects;
}

int load(const std::string& out, const std::string& plugin, const std::vector<std::string>& stubs,
         const std::string& program) {
  for (const auto& stub : stubs) {
    if (::dlopen(stub.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) {
      std::cerr << "expctl_torch_trim: " << ::dlerror() << "\n";
      return 1;
    }
  }
  void* handle = ::dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::cerr << "expctl_torch_trim: " << ::dlerror() << "\n";
    return 1;
  }
  const json document = {{"roots", {program, plugin}}, {"objects", loaded_objects(handle, program)}};
  std::ofstream(out) << document.dump(1) << "\n";
  return 0;
}

json read_json(const std::string& file) {
  std::ifstream in(file);
  return json::parse(in);
}

std::set<trim::Binding> read_trace(const std::string& file) {
  std::ifstream in(file);
  return trim::parse_bindings(in);
}

std::optional<trim::Manifest> read_manifest(const std::string& file) {
  const auto text = expctl::util::read_file(file);
  auto manifest = text ? trim::parse_manifest(*text) : std::nullopt;
  if (!manifest) {
    std::cerr << "expctl_torch_trim: " << file << " is not a manifest\n";
  }
  return manifest;
}

int plan(const std::string& objects_file, const std::string& trace, const std::string& manifest_file,
         const std::string& plugin) {
  const json loaded = read_json(objects_file);
  std::vector<trim::Object> objects;
  for (const auto& object : loaded.at("objects")) {
    objects.push_back({object.at("path"), object.at("soname"), object.at("identity"), object.at("needed")});
  }
  const auto manifest = trim::make_manifest(objects, read_trace(trace), loaded.at("roots"),
                                            vague_in_whole_load(plugin));
  std::ofstream(manifest_file) << trim::format_manifest(manifest);
  for (const auto& soname : manifest.stubs) {
    std::cout << soname << "\n";
  }
  return 0;
}

int verify(const std::string& objects_file, const std::string& manifest_file, const std::string& whole,
           const std::string& trimmed, const std::string& plugin) {
  const auto manifest = read_manifest(manifest_file);
  if (!manifest) {
    return 1;
  }
  // The program is this tool, not expctl: its own bindings are no part of the question.
  std::set<std::string> compared = {read_json(objects_file).at("roots").at(1).get<std::string>()};
  for (const auto& [path, identity] : manifest->kept) {
    compared.insert(path);
  }
  if (const auto difference = trim::first_difference(read_trace(whole), read_trace(trimmed), compared,
                                                         vague_in_whole_load(plugin))) {
    std::cout << *difference << "\n";
    return 1;
  }
  return 0;
}

int untrim(const std::string& manifest_file) {
  auto manifest = read_manifest(manifest_file);
  if (!manifest) {
    return 1;
  }
  manifest->stubs.clear();
  std::ofstream(manifest_file) << trim::format_manifest(*manifest);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() >= 3 && args[0] == "load") {
      return load(args[1], args[2], {args.begin() + 3, args.end()}, argv[0]);
    }
    if (args.size() == 5 && args[0] == "plan") {
      return plan(args[1], args[2], args[3], args[4]);
    }
    if (args.size() == 2 && args[0] == "untrim") {
      return untrim(args[1]);
    }
    if (args.size() == 6 && args[0] == "verify") {
      return verify(args[1], args[2], args[3], args[4], args[5]);
    }
  } catch (const std::exception& error) {
    std::cerr << "expctl_torch_trim: " << error.what() << "\n";
    return 1;
  }
  std::cerr << "usage: expctl_torch_trim load OBJECTS PLUGIN [STUB...] | plan OBJECTS TRACE MANIFEST PLUGIN | "
               "verify OBJECTS MANIFEST WHOLE TRIMMED PLUGIN | untrim MANIFEST\n";
  return 2;
}
