#include "serve/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/cpu_features.h"
#include "ops/ops.h"

namespace dflash::serve {

namespace {

constexpr char kMagic[8] = {'D', 'F', 'S', 'E', 'Q', 0, 0, 1};
constexpr const char* kSuffix = ".dfseq";
constexpr size_t kChunk = 1 << 20;  // bytes per read or write call

struct Header {
  char magic[8];
  uint32_t version = kDiskCacheVersion;
  uint32_t tokens = 0;
  uint64_t identity = 0, payload_bytes = 0, checksum = 0;
};
static_assert(sizeof(Header) == kDiskCacheHeaderBytes);

uint64_t HashOf(const void* data, size_t n) {
  Checksum c;
  c.Add(data, n);
  return c.Value();
}

std::string Hex(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof(s), "%016llx", static_cast<unsigned long long>(v));
  return s;
}

int64_t MtimeNs(const struct stat& st) { return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// Reads exactly n bytes at `offset`; false at the end of the file or on an error.
bool ReadAt(int fd, void* data, size_t n, uint64_t offset) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t got = pread(fd, p, n, static_cast<off_t>(offset));
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

bool WriteAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t put = write(fd, p, n);
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

// A model file's identity line: name, size, mtime and a hash of its header (a safetensors
// file's JSON header; the first MiB of anything else), not of gigabytes of weights.
std::string FileIdentity(const std::filesystem::path& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return path.filename().string() + " missing\n";
  uint64_t header = static_cast<uint64_t>(std::min<int64_t>(st.st_size, kChunk));
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (path.extension() == ".safetensors") {
    uint64_t n = 0;
    if (fd.fd >= 0 && ReadAt(fd.fd, &n, 8, 0) && n <= static_cast<uint64_t>(st.st_size) - 8) header = 8 + n;
  }
  std::vector<uint8_t> bytes(header);
  const bool read = fd.fd >= 0 && ReadAt(fd.fd, bytes.data(), bytes.size(), 0);
  std::ostringstream s;
  s << path.filename().string() << " " << st.st_size << " " << MtimeNs(st) << " "
    << (read ? Hex(HashOf(bytes.data(), bytes.size())) : "unreadable") << "\n";
  return s.str();
}

// Every file of a model: a directory's JSON and weight files, or the one file.
std::string ModelIdentity(const std::string& where) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(where, ec)) return FileIdentity(where);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(where, ec)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file(ec) && (ext == ".json" || ext == ".safetensors" || ext == ".gguf")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::string s;
  for (const auto& f : files) s += FileIdentity(f);
  return s;
}

std::string QuantName(const std::optional<DType>& q) { return q ? std::string(DTypeName(*q)) : "as stored"; }

}  // namespace

void Checksum::Word(uint64_t w) {
  h_ = (h_ ^ w) * 0x9e3779b97f4a7c15ull;
  h_ ^= h_ >> 29;
}

void Checksum::Add(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  length_ += n;
  while (n > 0 && tail_n_ > 0) {
    tail_[tail_n_++] = *p++;
    --n;
    if (tail_n_ == 8) {
      uint64_t w;
      std::memcpy(&w, tail_, 8);
      Word(w);
      tail_n_ = 0;
    }
  }
  if (tail_n_ > 0) return;  // the piece ended inside the pending word
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    Word(w);
  }
  std::memcpy(tail_, p, n);
  tail_n_ = static_cast<int>(n);
}

uint64_t Checksum::Value() const {
  uint64_t w = 0;
  std::memcpy(&w, tail_, static_cast<size_t>(tail_n_));
  uint64_t h = (h_ ^ w ^ (length_ << 3)) * 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

std::string DiskCacheIdentity(const Engine& engine) {
  const EngineOptions& o = engine.options();
  std::ostringstream s;
  s << "format: " << kDiskCacheVersion << "\n";
  // A rebuilt binary may compute other bits (a kernel change): its cache starts over.
  struct stat exe {};
  if (stat("/proc/self/exe", &exe) == 0) s << "binary: " << exe.st_size << " " << MtimeNs(exe) << "\n";
  s << "kernels: " << ops::SimdTargetName() << " bf16-dot " << ops::Bf16DotActive() << " avx512bf16 "
    << ops::CpuHasAvx512Bf16() << "\n";
  s << "kv type: " << DTypeName(o.kv_type) << "\n";
  s << "target quant: " << QuantName(o.target_quant) << "\n";
  s << "draft quant: " << QuantName(o.draft_quant) << "\n";
  s << "bf16 activations: " << o.bf16_activations << "\n";
  s << "target:\n" << ModelIdentity(o.target_dir);
  s << "draft:\n" << (o.draft_dir.empty() ? "none\n" : ModelIdentity(o.draft_dir));
  return s.str();
}

DiskCache::DiskCache(const Engine& engine, std::string dir, uint64_t max_bytes, const std::string& identity)
    : engine_(engine), dir_(std::move(dir)), max_bytes_(max_bytes), identity_hash_(HashOf(identity.data(), identity.size())) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (!std::filesystem::is_directory(dir_)) Fail("--cache-dir ", dir_, ": not a directory and cannot be created");
  if (access(dir_.c_str(), W_OK) != 0) Fail("--cache-dir ", dir_, ": not writable");
}

std::string DiskCache::NameFor(std::span<const int32_t> tokens) const {
  return Hex(identity_hash_) + "-" + Hex(HashOf(tokens.data(), tokens.size_bytes())) + kSuffix;
}

void DiskCache::Reject(const std::string& file, const std::string& why) {
  Warn(file, why);
  std::lock_guard<std::mutex> l(mu_);
  const auto e = index_.find(file);
  if (e != index_.end()) e->second.usable = false;  // until the file changes
}

void DiskCache::Warn(const std::string& file, const std::string& why) {
  std::fprintf(stderr, "warning: disk cache: ignoring %s/%s: %s\n", dir_.c_str(), file.c_str(), why.c_str());
  std::lock_guard<std::mutex> l(counters_mu_);
  ++counters_.rejected;
}

DiskCache::Entry DiskCache::ReadEntry(const std::string& name, int64_t size, int64_t mtime_ns) {
  Entry e;
  e.size = size;
  e.mtime_ns = mtime_ns;
  Fd fd(open((dir_ + "/" + name).c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return e;  // gone since the listing: another server evicted it
  Header h;
  if (!ReadAt(fd.fd, &h, sizeof(h), 0)) {
    Warn(name, "truncated header (" + std::to_string(size) + " bytes)");
  } else if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) {
    Warn(name, "not a dflash sequence file (bad magic)");
  } else if (h.version != kDiskCacheVersion) {
    Warn(name, "format version " + std::to_string(h.version) + ", this build reads " + std::to_string(kDiskCacheVersion));
  } else if (h.identity != identity_hash_) {
    Warn(name, "written for another model, build or settings (identity " + Hex(h.identity) + ", ours " + Hex(identity_hash_) + ")");
  } else if (static_cast<uint64_t>(size) != sizeof(Header) + h.payload_bytes) {
    Warn(name, "size " + std::to_string(size) + " bytes, its header says " + std::to_string(sizeof(Header) + h.payload_bytes) + " (truncated?)");
  } else if (h.tokens < 1 || static_cast<int64_t>(h.tokens) >= engine_.options().context ||
             h.payload_bytes < h.tokens * sizeof(int32_t)) {
    Warn(name, std::to_string(h.tokens) + " tokens, outside [1, --ctx " + std::to_string(engine_.options().context) + ")");
  } else {
    e.tokens.resize(h.tokens);
    if (ReadAt(fd.fd, e.tokens.data(), e.tokens.size() * sizeof(int32_t), sizeof(Header))) {
      e.usable = true;
    } else {
      e.tokens.clear();
      Warn(name, "truncated tokens");
    }
  }
  return e;
}

void DiskCache::Scan() {
  std::map<std::string, Entry> fresh;
  DIR* d = opendir(dir_.c_str());
  if (!d) return;
  while (const dirent* de = readdir(d)) {
    const std::string name = de->d_name;
    if (name.size() <= std::strlen(kSuffix) || name.compare(name.size() - std::strlen(kSuffix), std::string::npos, kSuffix) != 0) continue;
    struct stat st {};
    if (stat((dir_ + "/" + name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const auto old = index_.find(name);
    if (old != index_.end() && old->second.size == st.st_size && old->second.mtime_ns == MtimeNs(st)) {
      fresh[name] = std::move(old->second);
    } else {
      fresh[name] = ReadEntry(name, st.st_size, MtimeNs(st));
    }
  }
  closedir(d);
  index_ = std::move(fresh);
}

DiskCache::Match DiskCache::Find(std::span<const int32_t> prompt) {
  std::lock_guard<std::mutex> l(mu_);
  Scan();
  Match best;
  if (prompt.empty()) return best;
  for (const auto& [name, e] : index_) {
    if (!e.usable) continue;
    const size_t n = std::min(e.tokens.size(), prompt.size() - 1);
    const int common = static_cast<int>(std::mismatch(e.tokens.begin(), e.tokens.begin() + n, prompt.begin()).first - e.tokens.begin());
    if (common > best.common) best = {name, common};
  }
  return best;
}

bool DiskCache::Load(const Match& m, Sequence& seq) {
  seq.tokens.clear();
  const std::string path = dir_ + "/" + m.file;
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return false;  // evicted by another server since Find: a miss, not a fault
  struct stat st {};
  Header h;
  if (fstat(fd.fd, &st) != 0 || !ReadAt(fd.fd, &h, sizeof(h), 0)) {
    Reject(m.file, "unreadable header");
    return false;
  }
  // The checks Find's index made, again on this open file (it may have been replaced since).
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.version != kDiskCacheVersion || h.identity != identity_hash_ ||
      static_cast<uint64_t>(st.st_size) != sizeof(Header) + h.payload_bytes || h.tokens < 1 ||
      static_cast<int64_t>(h.tokens) >= engine_.options().context) {
    Reject(m.file, "header changed since it was indexed and no longer fits");
    return false;
  }
  // The whole payload is checked before any of it is used.
  std::vector<uint8_t> chunk(kChunk);
  Checksum sum;
  for (uint64_t at = 0; at < h.payload_bytes; at += kChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, h.payload_bytes - at));
    if (!ReadAt(fd.fd, chunk.data(), n, sizeof(Header) + at)) {
      Reject(m.file, "truncated while reading");
      return false;
    }
    sum.Add(chunk.data(), n);
  }
  if (sum.Value() != h.checksum) {
    Reject(m.file, "checksum mismatch (corrupt or modified)");
    return false;
  }
  uint64_t at = sizeof(Header);
  const uint64_t end = at + h.payload_bytes;
  const ByteSource in = [&](void* data, size_t n) {
    if (n > end - at || !ReadAt(fd.fd, data, n, at)) Fail("payload ends at byte ", end - sizeof(Header), " inside a field of ", n, " bytes");
    at += n;
  };
  try {
    std::vector<int32_t> tokens(h.tokens);
    in(tokens.data(), tokens.size() * sizeof(int32_t));
    const int vocab = engine_.target_config().decoder.vocab_size;
    for (int32_t t : tokens) {
      if (t < 0 || t >= vocab) Fail("token id ", t, " outside the vocabulary of ", vocab);
    }
    seq.target->Load(in);
    if (engine_.has_draft()) seq.draft.Load(in);
    if (seq.target->length() != static_cast<int>(tokens.size()) ||
        (engine_.has_draft() && seq.draft.length != static_cast<int>(tokens.size()))) {
      Fail("states of ", seq.target->length(), " (target) and ", seq.draft.length, " (draft) positions for ", tokens.size(), " tokens");
    }
    if (at != end) Fail(end - at, " bytes after the last field");
    seq.tokens = std::move(tokens);
  } catch (const Error& e) {
    Reject(m.file, e.what());
    // A later field failed after the target state loaded: a stream that ends at once leaves
    // every state empty (their Load's contract).
    const ByteSource nothing = [](void*, size_t) { Fail("no bytes"); };
    try {
      seq.target->Load(nothing);
    } catch (const Error&) {
    }
    seq.draft.length = 0;
    seq.tokens.clear();
    return false;
  }
  // A hit makes it the most recently used file.
  utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  std::lock_guard<std::mutex> l(counters_mu_);
  ++counters_.files_read;
  counters_.bytes_read += static_cast<uint64_t>(st.st_size);
  return true;
}

uint64_t DiskCache::SavedBytes(const Sequence& seq) const {
  uint64_t n = sizeof(Header) + seq.tokens.size() * sizeof(int32_t);
  const ByteSink count = [&](const void*, size_t bytes) { n += bytes; };
  seq.target->Save(count);
  if (engine_.has_draft()) seq.draft.Save(count);
  return n;
}

void DiskCache::Evict(uint64_t room) {
  struct File {
    int64_t mtime_ns;
    uint64_t size;
    std::string name;
  };
  std::vector<File> files;
  uint64_t total = 0;
  DIR* d = opendir(dir_.c_str());
  if (!d) return;
  while (const dirent* de = readdir(d)) {
    const std::string name = de->d_name;
    if (name == "." || name == ".." || name == ".lock") continue;
    struct stat st {};
    if (stat((dir_ + "/" + name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    total += static_cast<uint64_t>(st.st_size);
    // Only sequence files are evicted; anything else (a temporary file of a server that died
    // while writing, the user's own) counts against the bound but is left alone.
    if (name.size() > std::strlen(kSuffix) && name.compare(name.size() - std::strlen(kSuffix), std::string::npos, kSuffix) == 0) {
      files.push_back({MtimeNs(st), static_cast<uint64_t>(st.st_size), name});
    }
  }
  closedir(d);
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.mtime_ns < b.mtime_ns; });
  for (const File& f : files) {
    if (total + room <= max_bytes_) break;
    if (unlink((dir_ + "/" + f.name).c_str()) == 0) {
      total -= f.size;
      std::lock_guard<std::mutex> l(counters_mu_);
      ++counters_.evicted;
    }
  }
}

void DiskCache::Save(const Sequence& seq) {
  if (static_cast<int>(seq.tokens.size()) < kMinTokens) return;
  std::lock_guard<std::mutex> l(mu_);
  const std::string name = NameFor(seq.tokens);
  const std::string path = dir_ + "/" + name;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {  // the same tokens: saved before, by us or a neighbour
    utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
    return;
  }
  const uint64_t bytes = SavedBytes(seq);
  if (bytes > max_bytes_) return;
  Fd lock(open((dir_ + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.fd < 0 || flock(lock.fd, LOCK_EX) != 0) {
    std::fprintf(stderr, "warning: disk cache: cannot lock %s/.lock: %s\n", dir_.c_str(), std::strerror(errno));
    return;
  }
  Evict(bytes);
  const std::string tmp = dir_ + "/.tmp-" + std::to_string(getpid()) + "-" + name;
  Fd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  bool ok = fd.fd >= 0;
  Header h;
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.tokens = static_cast<uint32_t>(seq.tokens.size());
  h.identity = identity_hash_;
  Checksum sum;
  std::vector<uint8_t> buffer;
  buffer.reserve(kChunk);
  const auto flush = [&] {
    ok = ok && WriteAll(fd.fd, buffer.data(), buffer.size());
    buffer.clear();
  };
  const ByteSink out = [&](const void* data, size_t n) {
    sum.Add(data, n);
    h.payload_bytes += n;
    const auto* p = static_cast<const uint8_t*>(data);
    if (buffer.size() + n > kChunk) flush();
    if (n >= kChunk) {
      ok = ok && WriteAll(fd.fd, p, n);
    } else {
      buffer.insert(buffer.end(), p, p + n);
    }
  };
  ok = ok && lseek(fd.fd, sizeof(Header), SEEK_SET) == static_cast<off_t>(sizeof(Header));
  out(seq.tokens.data(), seq.tokens.size() * sizeof(int32_t));
  seq.target->Save(out);
  if (engine_.has_draft()) seq.draft.Save(out);
  flush();
  h.checksum = sum.Value();
  ok = ok && pwrite(fd.fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h));
  if (fd.fd >= 0) ok = close(fd.fd) == 0 && ok;
  fd.fd = -1;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "warning: disk cache: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    unlink(tmp.c_str());
    return;
  }
  std::lock_guard<std::mutex> c(counters_mu_);
  ++counters_.files_written;
  counters_.bytes_written += sizeof(Header) + h.payload_bytes;
}

DiskCacheCounters DiskCache::counters() const {
  std::lock_guard<std::mutex> l(counters_mu_);
  return counters_;
}

std::string DiskCache::RenderMetrics() const {
  const DiskCacheCounters c = counters();
  std::string out;
  const auto counter = [&](const char* name, const char* help, uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " + std::to_string(v) + "\n";
  };
  counter("dflash_cache_disk_files_read_total", "Saved sequences loaded from the disk cache.", c.files_read);
  counter("dflash_cache_disk_bytes_read_total", "Bytes of saved sequences loaded from the disk cache.", c.bytes_read);
  counter("dflash_cache_disk_files_written_total", "Sequences written to the disk cache.", c.files_written);
  counter("dflash_cache_disk_bytes_written_total", "Bytes written to the disk cache.", c.bytes_written);
  counter("dflash_cache_disk_rejected_total", "Disk cache files ignored as corrupt, truncated or foreign.", c.rejected);
  counter("dflash_cache_disk_evicted_total", "Disk cache files evicted to stay under --cache-disk.", c.evicted);
  return out;
}

}  // namespace dflash::serve
