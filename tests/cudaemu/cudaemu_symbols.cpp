/* cudaemu_symbols.cpp — finds every static __shared__ object in the executable's symbol table.
 *
 * Why the symbol table: a static local is shared by all fibers (right for __shared__), but g++
 * gives no portable way to place them in one section (it drops the section attribute in template
 * functions, and mixing inline and non-inline functions in one section is a compile error). So
 * __shared__ declares a marker static beside each object (cudaemu_kernel.h); a function's local
 * statics are named _ZZ<function>E<name>, so every writable _ZZ<function>E* object of a function
 * holding a marker is shared memory. Read once; must not poison anything itself (the scheduler
 * does). Without a symbol table (stripped binary) it warns once and finds nothing. */
#include "cudaemu_internal.h"

#include <algorithm>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace ddp_cudaemu {

static const char MARKER[] = "ddp_cudaemu_shared_marker_";

struct symbol_table {
    uintptr_t bias = 0;
    std::vector<std::string> function_prefixes;                      /* "_ZZ<function>E" with a marker */
    std::vector<std::pair<std::string, memory_range>> local_objects; /* writable _ZZ* objects */
    std::vector<memory_range> guards;                                /* the markers */
};

/* "_ZZ<function>E<len>ddp_cudaemu_shared_marker_<n>..." -> "_ZZ<function>E" */
static void note_marker(symbol_table &st, const char *name)
{
    const char *m = strstr(name, MARKER);
    const char *p = m;
    while (p > name && p[-1] >= '0' && p[-1] <= '9')
        p--;
    if (m && p > name)
        st.function_prefixes.emplace_back(name, (size_t)(p - name));
}

static int find_main_bias(struct dl_phdr_info *info, size_t, void *data)
{
    *static_cast<uintptr_t *>(data) = info->dlpi_addr;
    return 1; /* the first entry is the executable */
}

static bool read_symbols(symbol_table &st, const char *elf, size_t size)
{
    const Elf64_Ehdr *eh = reinterpret_cast<const Elf64_Ehdr *>(elf);
    if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > size)
        return false;
    const Elf64_Shdr *sh = reinterpret_cast<const Elf64_Shdr *>(elf + eh->e_shoff);
    bool found = false;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum)
            continue;
        const Elf64_Shdr &strs = sh[sh[i].sh_link];
        if (sh[i].sh_offset + sh[i].sh_size > size || strs.sh_offset + strs.sh_size > size)
            return false;
        const Elf64_Sym *syms = reinterpret_cast<const Elf64_Sym *>(elf + sh[i].sh_offset);
        const char *names = elf + strs.sh_offset;
        for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); k++) {
            const Elf64_Sym &s = syms[k];
            if (s.st_name >= strs.sh_size || s.st_shndx == SHN_UNDEF || s.st_shndx >= eh->e_shnum)
                continue;
            const char *name = names + s.st_name;
            if (ELF64_ST_TYPE(s.st_info) != STT_OBJECT || strncmp(name, "_ZZ", 3) != 0 ||
                !(sh[s.st_shndx].sh_flags & SHF_WRITE))
                continue;
            if (strstr(name, MARKER)) {
                note_marker(st, name);
                st.guards.push_back(memory_range{reinterpret_cast<void *>(s.st_value + st.bias), (size_t)s.st_size});
            }
            else if (s.st_size > 0)
                st.local_objects.push_back({name, memory_range{reinterpret_cast<void *>(s.st_value + st.bias),
                                                               (size_t)s.st_size}});
        }
        found = true;
    }
    return found;
}

static void load(symbol_table &st)
{
    dl_iterate_phdr(find_main_bias, &st.bias);
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        if (fd >= 0)
            close(fd);
        return;
    }
    void *map = mmap(nullptr, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return;
    if (!read_symbols(st, static_cast<const char *>(map), (size_t)sb.st_size))
        fprintf(stderr, "cudaemu: warning: no symbol table in the executable; static __shared__ arrays of "
                        "template kernels are not poisoned\n");
    munmap(map, (size_t)sb.st_size);
}

namespace {
struct shared_symbols {
    std::vector<memory_range> objects, guards; /* guards: by address */
};

const shared_symbols &shared()
{
    static const shared_symbols found = [] {
        shared_symbols out;
        symbol_table table;
        load(table);
        std::vector<std::string> prefixes = table.function_prefixes; /* one per marker */
        std::sort(prefixes.begin(), prefixes.end());
        std::vector<size_t> objects_of(prefixes.size());
        for (const auto &obj : table.local_objects) /* a few dozen of each: a plain scan */
            for (size_t p = 0; p < prefixes.size(); p++)
                if (obj.first.compare(0, prefixes[p].size(), prefixes[p]) == 0) {
                    out.objects.push_back(obj.second);
                    objects_of[p]++;
                    break;
                }
        /* each marker guards the one object declared with it: `__shared__ float a[N], b[N];` would
         * leave b's overruns into a unseen */
        for (size_t p = 0, q; p < prefixes.size(); p = q) {
            for (q = p; q < prefixes.size() && prefixes[q] == prefixes[p]; q++) {
            }
            if (objects_of[p] > q - p) {
                fprintf(stderr, "cudaemu: %s... declares %zu static __shared__ objects in %zu __shared__ "
                                "declarations: declare one object per __shared__, so each has its guard\n",
                        prefixes[p].c_str(), objects_of[p], q - p);
                abort();
            }
        }
        out.guards = std::move(table.guards);
        std::sort(out.guards.begin(), out.guards.end(),
                  [](const memory_range &a, const memory_range &b) { return a.addr < b.addr; });
        return out;
    }();
    return found;
}
} // namespace

const memory_range *static_shared_objects(size_t *count)
{
    *count = shared().objects.size();
    return shared().objects.data();
}

const memory_range *static_shared_guard(const void *p, size_t bytes)
{
    const std::vector<memory_range> &g = shared().guards;
    const char *c = static_cast<const char *>(p);
    auto it = std::upper_bound(g.begin(), g.end(), c + bytes - 1,
                               [](const char *q, const memory_range &r) { return q < (const char *)r.addr; });
    if (it == g.begin())
        return nullptr;
    --it; /* the last guard starting at or before the access's last byte: does it reach its first? */
    return c < (const char *)it->addr + it->bytes ? &*it : nullptr;
}

} /* namespace ddp_cudaemu */
