/* cudaemu_symbols.cpp — finds the static __shared__ objects of a kernel in the executable's
 * symbol table.
 *
 * Why: __shared__ places statics in the poisoned section "ddp_cuda_shared", but g++ (12) drops
 * the section attribute for static locals of template functions, and kernels templated on the
 * block size are common. A kernel's local statics are named _ZZ<kernel encoding>E...; we find the
 * kernel's own symbol by address, then every writable local object of it. Read once per kernel
 * and cached. Must not poison anything itself (the scheduler does). Without a symbol table
 * (stripped binary) it warns once and finds nothing. */
#include "cudaemu_internal.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <map>
#include <mutex>
#include <stdio.h>
#include <string.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace ddp_cudaemu {

struct symbol_table {
    bool loaded = false;
    uintptr_t bias = 0;
    std::map<uintptr_t, std::string> functions;                    /* address -> mangled name */
    std::vector<std::pair<std::string, memory_range>> local_objects; /* writable _ZZ* objects */
};

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
            int type = ELF64_ST_TYPE(s.st_info);
            if (type == STT_FUNC)
                st.functions[s.st_value + st.bias] = name;
            else if (type == STT_OBJECT && s.st_size > 0 && strncmp(name, "_ZZ", 3) == 0 &&
                     (sh[s.st_shndx].sh_flags & SHF_WRITE))
                st.local_objects.push_back({name, memory_range{reinterpret_cast<void *>(s.st_value + st.bias),
                                                               (size_t)s.st_size}});
        }
        found = true;
    }
    return found;
}

static void load(symbol_table &st)
{
    st.loaded = true;
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

const memory_range *kernel_static_shared(const void *fn, size_t *count)
{
    static std::mutex lock;
    static symbol_table table;
    static std::map<const void *, std::vector<memory_range>> per_kernel;
    std::lock_guard<std::mutex> hold(lock);
    auto cached = per_kernel.find(fn);
    if (cached == per_kernel.end()) {
        if (!table.loaded)
            load(table);
        std::vector<memory_range> ranges;
        auto f = table.functions.find(reinterpret_cast<uintptr_t>(fn));
        if (f != table.functions.end()) {
            const std::string &fname = f->second; /* extern "C" kernels are not mangled */
            std::string encoding = fname.compare(0, 2, "_Z") == 0 ? fname.substr(2)
                                                                   : std::to_string(fname.size()) + fname;
            std::string prefix = "_ZZ" + encoding + "E";
            for (const auto &obj : table.local_objects)
                if (obj.first.compare(0, prefix.size(), prefix) == 0)
                    ranges.push_back(obj.second);
        }
        cached = per_kernel.emplace(fn, std::move(ranges)).first;
    }
    *count = cached->second.size();
    return cached->second.data();
}

} /* namespace ddp_cudaemu */
