#include "core/npz.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/file.h"
#include "core/text.h"
#include "core/threading.h"

namespace strata::npy {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kMax32 = 0xffffffffu;
/// Members whose size could reach 4 GiB get Zip64 local headers (deflate can grow data slightly).
constexpr uint64_t kZip64Threshold = 0xf0000000u;
constexpr std::size_t kDeflateBlock = std::size_t{4} << 20;

uint16_t get16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t get32(const unsigned char* p) { return get16(p) | (static_cast<uint32_t>(get16(p + 2)) << 16); }
uint64_t get64(const unsigned char* p) { return get32(p) | (static_cast<uint64_t>(get32(p + 4)) << 32); }
void put16(std::string& s, uint64_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>((v >> 8) & 0xff));
}
void put32(std::string& s, uint64_t v) {
  put16(s, v & 0xffff);
  put16(s, (v >> 16) & 0xffff);
}
void put64(std::string& s, uint64_t v) {
  put32(s, v & kMax32);
  put32(s, v >> 32);
}

std::string member_where(const std::string& path, std::string_view member) {
  return "npz " + quote_path(path) + ", member " + quote_field(member);
}

// ---- .npy header -------------------------------------------------------------------------------------

/// The dict literal of a header, parsed by hand (Note [npy and npz formats]).
class DictParser {
 public:
  DictParser(std::string_view text, std::size_t base, const std::string& where)
      : s_(text), base_(base), where_(where) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = quoted();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        h.dtype = dtype_from(quoted());
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        have_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        have_shape = true;
      } else {
        fail("unexpected key " + quote_field(key));
      }
      skip_ws();
      if (peek() == ',') ++pos_;
    }
    if (!have_descr || !have_order || !have_shape) fail("the dict lacks 'descr', 'fortran_order' or 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(detail::format_message(where_, ": bad .npy header at byte ", base_ + pos_, ": ", what, " (header ",
                                       quote_field(s_, 128), ")"));
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n')) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string quoted() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const std::size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("fortran_order must be True or False");
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> out;
    int64_t elements = 1;
    for (;;) {
      skip_ws();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("expected a non-negative integer in the shape");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (int64_t{1} << 58)) fail("a dimension is too large");
        v = v * 10 + (s_[pos_++] - '0');
      }
      if (peek() == 'L') ++pos_;  // Python 2 longs
      out.push_back(v);
      if (v != 0 && elements > (int64_t{1} << 60) / v) fail("the shape has too many elements");
      elements *= v;
      skip_ws();
      if (peek() == ',')
        ++pos_;
      else if (peek() != ')')
        fail("expected ',' or ')' in the shape");
    }
    ++pos_;
    return out;
  }
  Dtype dtype_from(const std::string& d) {
    static const std::pair<const char*, Dtype> known[] = {{"<i4", Dtype::I4}, {"<i8", Dtype::I8}, {"<f4", Dtype::F4},
                                                          {"<f8", Dtype::F8}, {"|u1", Dtype::U1}, {"|b1", Dtype::B1}};
    for (const auto& [name, t] : known)
      if (d == name) return t;
    fail("dtype " + quote_field(d) + " is not supported (expected <i4, <i8, <f4, <f8, |u1 or |b1)");
  }

  std::string_view s_;
  std::size_t base_;
  const std::string& where_;
  std::size_t pos_ = 0;
};

std::size_t read_fully(ByteSource& in, void* dst, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    const std::size_t k = in.read_some(static_cast<char*>(dst) + got, n - got);
    if (k == 0) break;
    got += k;
  }
  return got;
}

}  // namespace

const char* descr(Dtype d) {
  switch (d) {
    case Dtype::I4: return "<i4";
    case Dtype::I8: return "<i8";
    case Dtype::F4: return "<f4";
    case Dtype::F8: return "<f8";
    case Dtype::U1: return "|u1";
    case Dtype::B1: return "|b1";
  }
  return "?";
}

std::size_t itemsize(Dtype d) {
  switch (d) {
    case Dtype::I4:
    case Dtype::F4: return 4;
    case Dtype::I8:
    case Dtype::F8: return 8;
    case Dtype::U1:
    case Dtype::B1: return 1;
  }
  return 1;
}

int64_t Header::count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Header::shape_string() const {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string make_header(Dtype dtype, const std::vector<int64_t>& shape, bool fortran_order) {
  Header h;
  h.shape = shape;
  std::string dict = std::string("{'descr': '") + descr(dtype) +
                     "', 'fortran_order': " + (fortran_order ? "True" : "False") + ", 'shape': " + h.shape_string() +
                     ", }";
  const bool v2 = dict.size() + 1 + 10 > 65535;
  const std::size_t prefix = v2 ? 12 : 10;
  const std::size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  if (v2)
    put32(out, dict.size());
  else
    put16(out, dict.size());
  return out + dict;
}

Header read_header(ByteSource& in, const std::string& where) {
  unsigned char pre[12];
  const std::size_t got = read_fully(in, pre, 8);
  STRATA_CHECK(got == 8 && std::memcmp(pre, "\x93NUMPY", 6) == 0, where,
               ": not .npy data (bad magic at byte 0; expected \\x93NUMPY, got ",
               quote_field(std::string_view(reinterpret_cast<const char*>(pre), got)), ")");
  const int major = pre[6];
  STRATA_CHECK(major >= 1 && major <= 3 && pre[7] == 0, where, ": bad .npy header at byte 6: version ", major, ".",
               static_cast<int>(pre[7]), " is not supported (1.0, 2.0 or 3.0)");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  STRATA_CHECK(read_fully(in, pre + 8, len_bytes) == len_bytes, where, ": bad .npy header at byte 8: the data ends ",
               "inside the header length");
  const uint64_t len = major == 1 ? get16(pre + 8) : get32(pre + 8);
  STRATA_CHECK(len <= (uint64_t{1} << 24), where, ": bad .npy header at byte 8: header length ", len,
               " is implausible (more than 16 MiB)");
  std::string dict(static_cast<std::size_t>(len), '\0');
  const std::size_t have = read_fully(in, dict.data(), dict.size());
  STRATA_CHECK(have == dict.size(), where, ": bad .npy header at byte ", 8 + len_bytes + have,
               ": the data ends inside the header (", have, " of ", len, " bytes)");
  Header h = DictParser(dict, 8 + len_bytes, where).parse();
  h.header_bytes = 8 + len_bytes + len;
  return h;
}

// ---- member streams ------------------------------------------------------------------------------------

namespace {

/// One stored or deflated byte range of a file (an .npz member or a whole .npy file).
class FileMember final : public MemberReader, public ByteSource {
 public:
  FileMember(const std::string& path, std::string where, uint64_t data_start, uint64_t compressed,
             uint64_t uncompressed, uint16_t method, bool check_crc, uint32_t crc)
      : path_(path),
        where_(std::move(where)),
        start_(data_start),
        remaining_(compressed),
        expected_(uncompressed),
        method_(method),
        check_crc_(check_crc),
        stored_crc_(crc) {
    file_ = open_file_for_reading(path, "npz");
    STRATA_CHECK(::fseeko(file_, static_cast<off_t>(start_), SEEK_SET) == 0, where_, ": cannot seek to byte ", start_);
    if (method_ == 8) {
      std::memset(&zs_, 0, sizeof zs_);
      STRATA_CHECK(inflateInit2(&zs_, -MAX_WBITS) == Z_OK, where_, ": zlib inflateInit2 failed");
      inflating_ = true;
      in_.resize(std::size_t{1} << 20);
    }
    try {
      header_ = read_header(*this, where_);
    } catch (...) {
      release();
      throw;
    }
    const uint64_t described = header_.header_bytes + header_.data_bytes();
    if (expected_ != kUnknownSize && described != expected_) release();
    STRATA_CHECK(expected_ == kUnknownSize || described == expected_, where_, ": the member holds ", expected_,
                 " bytes but its header describes ", described, " (", header_.header_bytes, " header bytes + shape ",
                 header_.shape_string(), " of ", descr(header_.dtype), ")");
    if (expected_ == kUnknownSize) expected_ = described;
  }
  ~FileMember() override { release(); }
  void release() {
    if (inflating_) inflateEnd(&zs_);
    inflating_ = false;
    if (file_ != nullptr) std::fclose(file_);
    file_ = nullptr;
  }

  static constexpr uint64_t kUnknownSize = ~uint64_t{0};

  std::size_t read_some(void* dst, std::size_t n) override {
    n = static_cast<std::size_t>(std::min<uint64_t>(n, expected_ - produced_));
    if (n == 0) return 0;
    const std::size_t got = method_ == 8 ? inflate_some(dst, n) : stored_some(dst, n);
    if (check_crc_) crc_ = crc32_z(crc_, static_cast<const Bytef*>(dst), got);
    produced_ += got;
    return got;
  }

  void read(void* dst, std::size_t n) override {
    const std::size_t got = read_fully(*this, dst, n);
    STRATA_CHECK(got == n, where_, ": the data ends early: byte ", produced_, " of ", expected_,
                 " (the compressed data stops at file byte ", start_ + consumed_, "; truncated file?)");
  }

  void finish() override {
    STRATA_CHECK(produced_ == expected_, where_, ": only ", produced_, " of ", expected_, " bytes were read");
    if (method_ == 8 && !ended_) {
      unsigned char extra;
      const std::size_t got = inflate_some(&extra, 0);
      (void)got;
      STRATA_CHECK(ended_, where_, ": the deflate stream does not end after ", expected_, " bytes (at file byte ",
                   start_ + consumed_, ")");
    }
    if (check_crc_)
      STRATA_CHECK(static_cast<uint32_t>(crc_) == stored_crc_, where_, ": CRC-32 mismatch (stored ", hex(stored_crc_),
                   ", computed ", hex(static_cast<uint32_t>(crc_)), "): the data is corrupt");
  }

  int64_t data_file_offset() const override {
    return method_ == 0 ? static_cast<int64_t>(start_ + header_.header_bytes) : -1;
  }

 private:
  static std::string hex(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", v);
    return buf;
  }

  std::size_t stored_some(void* dst, std::size_t n) {
    n = static_cast<std::size_t>(std::min<uint64_t>(n, remaining_));
    const std::size_t got = std::fread(dst, 1, n, file_);
    remaining_ -= got;
    consumed_ += got;
    return got;
  }

  /// Inflates up to n bytes; n == 0 only drives the stream to its end marker.
  std::size_t inflate_some(void* dst, std::size_t n) {
    unsigned char sink;
    zs_.next_out = n ? static_cast<Bytef*>(dst) : &sink;
    zs_.avail_out = static_cast<uInt>(n ? std::min<std::size_t>(n, 1u << 30) : 1);
    const uInt want = zs_.avail_out;
    while (zs_.avail_out > 0 && !ended_) {
      if (zs_.avail_in == 0) {
        const std::size_t k = static_cast<std::size_t>(std::min<uint64_t>(in_.size(), remaining_));
        if (k == 0) break;
        const std::size_t got = std::fread(in_.data(), 1, k, file_);
        STRATA_CHECK(got == k, where_, ": the file ends at byte ", start_ + consumed_ + got,
                     " inside the member's compressed data (truncated?)");
        remaining_ -= got;
        zs_.next_in = in_.data();
        zs_.avail_in = static_cast<uInt>(got);
      }
      const uInt before = zs_.avail_in;
      const int ret = inflate(&zs_, Z_NO_FLUSH);
      consumed_ += before - zs_.avail_in;
      if (ret == Z_STREAM_END) {
        ended_ = true;
      } else if (ret != Z_OK && !(ret == Z_BUF_ERROR && zs_.avail_in == 0)) {
        STRATA_FAIL(where_, ": corrupt deflate data near file byte ", start_ + consumed_,
                    " (zlib: ", zs_.msg != nullptr ? zs_.msg : "error", ")");
      }
    }
    const std::size_t got = want - zs_.avail_out;
    STRATA_CHECK(n != 0 || got == 0, where_, ": the deflate stream holds more than the ", expected_,
                 " bytes the directory gives");
    return got;
  }

  std::string path_;
  std::string where_;
  std::FILE* file_ = nullptr;
  uint64_t start_;
  uint64_t remaining_;
  uint64_t consumed_ = 0;
  uint64_t expected_;
  uint64_t produced_ = 0;
  uint16_t method_;
  bool check_crc_;
  uint32_t stored_crc_;
  uLong crc_ = 0;
  z_stream zs_{};
  bool inflating_ = false;
  bool ended_ = false;
  std::vector<unsigned char> in_;
};

uint64_t file_size_of(std::FILE* f, const std::string& where) {
  STRATA_CHECK(::fseeko(f, 0, SEEK_END) == 0, where, ": cannot determine its size");
  const off_t size = ::ftello(f);
  STRATA_CHECK(size >= 0, where, ": cannot determine its size");
  return static_cast<uint64_t>(size);
}

void read_at(std::FILE* f, uint64_t offset, void* dst, std::size_t n, const std::string& where, const char* what) {
  STRATA_CHECK(::fseeko(f, static_cast<off_t>(offset), SEEK_SET) == 0 && std::fread(dst, 1, n, f) == n, where,
               ": cannot read the ", what, " at byte ", offset, " (", n, " bytes; truncated file?)");
}

}  // namespace

// ---- NpzReader ------------------------------------------------------------------------------------------

NpzReader::NpzReader(std::string path) : path_(std::move(path)) {
  std::FILE* f = open_file_for_reading(path_, "npz");
  try {
    read_directory(f);
  } catch (...) {
    std::fclose(f);
    throw;
  }
  std::fclose(f);
}

void NpzReader::read_directory(std::FILE* f) {
  const std::string where = "npz " + quote_path(path_);
  file_size_ = file_size_of(f, where);
  const uint64_t tail_len = std::min<uint64_t>(file_size_, 65535 + 22);
  std::vector<unsigned char> tail(static_cast<std::size_t>(tail_len));
  read_at(f, file_size_ - tail_len, tail.data(), tail.size(), where, "end of the archive");
  int64_t at = -1;
  for (int64_t i = static_cast<int64_t>(tail.size()) - 22; i >= 0; --i)
    if (get32(&tail[static_cast<std::size_t>(i)]) == kEndSig) {
      at = i;
      break;
    }
  STRATA_CHECK(at >= 0, where, ": not a zip archive (no end-of-central-directory record in its last ", tail_len,
               " bytes; the file is truncated or not an .npz)");
  const unsigned char* e = &tail[static_cast<std::size_t>(at)];
  const uint64_t end_pos = file_size_ - tail_len + static_cast<uint64_t>(at);
  uint64_t entries = get16(e + 10), cd_size = get32(e + 12), cd_offset = get32(e + 16);
  if (entries == 0xffff || cd_size == kMax32 || cd_offset == kMax32) {
    STRATA_CHECK(end_pos >= 20, where, ": the Zip64 end-of-central-directory locator is missing");
    unsigned char loc[20], z[56];
    read_at(f, end_pos - 20, loc, 20, where, "Zip64 locator");
    STRATA_CHECK(get32(loc) == kZip64LocatorSig, where, ": bad Zip64 locator signature at byte ", end_pos - 20);
    const uint64_t z_at = get64(loc + 8);
    read_at(f, z_at, z, 56, where, "Zip64 end-of-central-directory record");
    STRATA_CHECK(get32(z) == kZip64EndSig, where, ": bad Zip64 end-of-central-directory signature at byte ", z_at);
    entries = get64(z + 32);
    cd_size = get64(z + 40);
    cd_offset = get64(z + 48);
  }
  STRATA_CHECK(cd_offset + cd_size <= end_pos && entries <= cd_size / 46, where, ": the central directory (byte ",
               cd_offset, ", ", cd_size, " bytes, ", entries, " entries) does not fit before byte ", end_pos,
               " (truncated or corrupt archive)");
  std::vector<unsigned char> cd(static_cast<std::size_t>(cd_size));
  read_at(f, cd_offset, cd.data(), cd.size(), where, "central directory");
  std::size_t p = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    STRATA_CHECK(p + 46 <= cd.size() && get32(&cd[p]) == kCentralSig, where, ": bad central directory entry ", i,
                 " at byte ", cd_offset + p);
    const unsigned char* c = &cd[p];
    Entry en;
    const uint16_t flags = get16(c + 8);
    en.method = get16(c + 10);
    en.crc = get32(c + 16);
    en.compressed = get32(c + 20);
    en.uncompressed = get32(c + 24);
    const std::size_t nlen = get16(c + 28), xlen = get16(c + 30), clen = get16(c + 32);
    en.local_offset = get32(c + 42);
    STRATA_CHECK(p + 46 + nlen + xlen + clen <= cd.size(), where, ": central directory entry ", i, " at byte ",
                 cd_offset + p, " runs past the directory");
    en.name.assign(reinterpret_cast<const char*>(c + 46), nlen);
    // Zip64 extra: the fields that are 0xffffffff above, in this order.
    for (std::size_t x = 46 + nlen; x + 4 <= 46 + nlen + xlen;) {
      const uint16_t id = get16(c + x), sz = get16(c + x + 2);
      if (id == 1) {
        std::size_t q = x + 4;
        auto take = [&](uint64_t& field) {
          if (field != kMax32) return;
          STRATA_CHECK(q + 8 <= x + 4 + sz, where, ": member ", quote_field(en.name), ": short Zip64 extra field");
          field = get64(c + q);
          q += 8;
        };
        take(en.uncompressed);
        take(en.compressed);
        take(en.local_offset);
      }
      x += 4 + sz;
    }
    STRATA_CHECK((flags & 1) == 0, member_where(path_, en.name), ": encrypted members are not supported");
    STRATA_CHECK(en.method == 0 || en.method == 8, member_where(path_, en.name), ": compression method ", en.method,
                 " is not supported (stored or deflate)");
    entries_.push_back(std::move(en));
    p += 46 + nlen + xlen + clen;
  }
}

std::vector<std::string> NpzReader::names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) {
    const std::string& n = e.name;
    out.push_back(n.size() > 4 && n.compare(n.size() - 4, 4, ".npy") == 0 ? n.substr(0, n.size() - 4) : n);
  }
  return out;
}

bool NpzReader::contains(std::string_view name) const {
  const auto all = names();
  return std::find(all.begin(), all.end(), name) != all.end();
}

std::unique_ptr<MemberReader> NpzReader::open(std::string_view name) const {
  const auto all = names();
  const auto it = std::find(all.begin(), all.end(), name);
  if (it == all.end()) {
    std::string list;
    for (const auto& n : all) list += (list.empty() ? "" : ", ") + n;
    STRATA_FAIL("npz ", quote_path(path_), ": member ", quote_field(name),
                " is missing (it holds: ", list.empty() ? "nothing" : list, ")");
  }
  const Entry& e = entries_[static_cast<std::size_t>(it - all.begin())];
  const std::string where = member_where(path_, e.name);
  std::FILE* f = open_file_for_reading(path_, "npz");
  unsigned char lh[30];
  try {
    read_at(f, e.local_offset, lh, 30, where, "local header");
  } catch (...) {
    std::fclose(f);
    throw;
  }
  std::fclose(f);
  STRATA_CHECK(get32(lh) == kLocalSig, where, ": bad local header signature at byte ", e.local_offset);
  const uint64_t start = e.local_offset + 30 + get16(lh + 26) + get16(lh + 28);
  STRATA_CHECK(start + e.compressed <= file_size_, where, ": its data runs from byte ", start, " to byte ",
               start + e.compressed, " but the file has ", file_size_, " bytes (truncated)");
  return std::make_unique<FileMember>(path_, where, start, e.compressed, e.uncompressed, e.method, true, e.crc);
}

std::unique_ptr<MemberReader> open_npy(const std::string& path) {
  std::FILE* f = open_file_for_reading(path, "npy");
  uint64_t size = 0;
  try {
    size = file_size_of(f, "npy " + quote_path(path));
  } catch (...) {
    std::fclose(f);
    throw;
  }
  std::fclose(f);
  return std::make_unique<FileMember>(path, "npy " + quote_path(path), 0, size, FileMember::kUnknownSize, 0, false, 0);
}

template <typename T>
Array<T> read_array(const NpzReader& npz, std::string_view name) {
  auto m = npz.open(name);
  Array<T> out;
  out.header = m->header();
  const Dtype want = dtype_of<T>();
  const bool ok = out.header.dtype == want || (want == Dtype::U1 && out.header.dtype == Dtype::B1);
  const std::string where = member_where(npz.path(), std::string(name) + ".npy");
  STRATA_CHECK(ok, where, ": dtype ", descr(out.header.dtype), ", expected ", descr(want));
  STRATA_CHECK(!out.header.fortran_order || out.header.shape.size() < 2, where,
               ": Fortran-order arrays are not supported here (shape ", out.header.shape_string(), ")");
  out.data.resize(static_cast<std::size_t>(out.header.count()));
  m->read(out.data.data(), out.data.size() * sizeof(T));
  m->finish();
  return out;
}

template Array<int32_t> read_array<int32_t>(const NpzReader&, std::string_view);
template Array<int64_t> read_array<int64_t>(const NpzReader&, std::string_view);
template Array<float> read_array<float>(const NpzReader&, std::string_view);
template Array<double> read_array<double>(const NpzReader&, std::string_view);
template Array<uint8_t> read_array<uint8_t>(const NpzReader&, std::string_view);

std::vector<int64_t> read_integers(const NpzReader& npz, std::string_view name, Header* header) {
  auto m = npz.open(name);
  const Header& h = m->header();
  if (header != nullptr) *header = h;
  const auto n = static_cast<std::size_t>(h.count());
  std::vector<unsigned char> raw(n * itemsize(h.dtype));
  m->read(raw.data(), raw.size());
  m->finish();
  std::vector<int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* p = raw.data() + i * itemsize(h.dtype);
    double real = 0;
    switch (h.dtype) {
      case Dtype::I4: out[i] = static_cast<int32_t>(get32(p)); continue;
      case Dtype::I8: out[i] = static_cast<int64_t>(get64(p)); continue;
      case Dtype::U1:
      case Dtype::B1: out[i] = *p; continue;
      case Dtype::F4: {
        float v;
        std::memcpy(&v, p, 4);
        real = v;
        break;
      }
      case Dtype::F8: std::memcpy(&real, p, 8); break;
    }
    STRATA_CHECK(std::isfinite(real) && real == std::floor(real) && std::fabs(real) < 9.2e18,
                 member_where(npz.path(), std::string(name) + ".npy"), ": element ", i, " is ", real,
                 ", not an integer");
    out[i] = static_cast<int64_t>(real);
  }
  return out;
}

// ---- NpzWriter ------------------------------------------------------------------------------------------

NpzWriter::NpzWriter(std::string path, bool compress, int level)
    : path_(std::move(path)), compress_(compress), level_(level) {
  STRATA_CHECK(level_ >= 1 && level_ <= 9, "npz writer: zlib level must lie in [1, 9], got ", level_);
  file_ = std::make_unique<AtomicFile>(path_, "npz");
}

NpzWriter::~NpzWriter() = default;  // an unclosed file_ removes its temporary

uint64_t NpzWriter::tell() const { return file_->size(); }

void NpzWriter::write_bytes(const void* p, std::size_t n) { file_->write(p, n); }

void NpzWriter::write_local_header(const std::string& name, bool zip64) {
  std::string h;
  put32(h, kLocalSig);
  put16(h, zip64 ? 45 : 20);
  put16(h, 0);                   // flags
  put16(h, compress_ ? 8 : 0);   // method
  put16(h, 0);                   // time 00:00
  put16(h, 0x21);                // date 1980-01-01
  put32(h, 0);                   // crc (patched)
  put32(h, zip64 ? kMax32 : 0);  // compressed (patched)
  put32(h, zip64 ? kMax32 : 0);  // uncompressed (patched)
  put16(h, name.size());
  put16(h, zip64 ? 20 : 0);
  h += name;
  if (zip64) {
    put16(h, 1);
    put16(h, 16);
    put64(h, 0);
    put64(h, 0);
  }
  write_bytes(h.data(), h.size());
}

void NpzWriter::patch_local_header(const Written& w, bool zip64) {
  std::string crc_sizes;
  put32(crc_sizes, w.crc);
  put32(crc_sizes, zip64 ? kMax32 : w.compressed);
  put32(crc_sizes, zip64 ? kMax32 : w.uncompressed);
  std::string z;
  put64(z, w.uncompressed);
  put64(z, w.compressed);
  file_->write_at(crc_sizes.data(), 12, w.local_offset + 14);
  if (zip64) file_->write_at(z.data(), 16, w.local_offset + 30 + w.name.size() + 4);
}

void NpzWriter::store_payload(const std::string& header, const unsigned char* data, uint64_t bytes, Written& w) {
  uLong crc = crc32_z(0, reinterpret_cast<const Bytef*>(header.data()), header.size());
  write_bytes(header.data(), header.size());
  for (uint64_t at = 0; at < bytes; at += kDeflateBlock) {
    const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kDeflateBlock, bytes - at));
    crc = crc32_z(crc, data + at, n);
    write_bytes(data + at, n);
  }
  w.crc = static_cast<uint32_t>(crc);
  w.compressed = header.size() + bytes;
}

void NpzWriter::deflate_payload(const std::string& header, const unsigned char* data, uint64_t bytes, Written& w) {
  // Block 0 is the .npy header; blocks 1.. are kDeflateBlock bytes of data (Note [npy and npz formats]).
  const uint64_t data_blocks = (bytes + kDeflateBlock - 1) / kDeflateBlock;
  const int64_t blocks = 1 + static_cast<int64_t>(data_blocks);
  const int64_t wave = std::max<int64_t>(2, 2 * get_num_threads());
  std::vector<std::vector<unsigned char>> out(static_cast<std::size_t>(wave));
  std::vector<uLong> crcs(static_cast<std::size_t>(wave));
  std::vector<std::size_t> lens(static_cast<std::size_t>(wave));
  uLong crc = 0;
  w.compressed = 0;
  for (int64_t first = 0; first < blocks; first += wave) {
    const int64_t count = std::min(wave, blocks - first);
    parallel_for(count, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t b = first + i;
        const unsigned char* src = b == 0 ? reinterpret_cast<const unsigned char*>(header.data())
                                          : data + static_cast<uint64_t>(b - 1) * kDeflateBlock;
        const std::size_t n = b == 0 ? header.size()
                                     : static_cast<std::size_t>(std::min<uint64_t>(
                                           kDeflateBlock, bytes - static_cast<uint64_t>(b - 1) * kDeflateBlock));
        z_stream zs{};
        STRATA_CHECK(deflateInit2(&zs, level_, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK,
                     "npz: zlib deflateInit2 failed");
        auto& buf = out[static_cast<std::size_t>(i)];
        buf.resize(deflateBound(&zs, static_cast<uLong>(n)) + 64);
        zs.next_in = const_cast<Bytef*>(src);
        zs.avail_in = static_cast<uInt>(n);
        zs.next_out = buf.data();
        zs.avail_out = static_cast<uInt>(buf.size());
        const int ret = deflate(&zs, b == blocks - 1 ? Z_FINISH : Z_SYNC_FLUSH);
        const bool ok = b == blocks - 1 ? ret == Z_STREAM_END : (ret == Z_OK && zs.avail_in == 0);
        lens[static_cast<std::size_t>(i)] = buf.size() - zs.avail_out;
        deflateEnd(&zs);
        STRATA_CHECK(ok, "npz: zlib deflate failed (", ret, ")");
        crcs[static_cast<std::size_t>(i)] = crc32_z(0, src, n);
      }
    });
    for (int64_t i = 0; i < count; ++i) {
      const int64_t b = first + i;
      const uint64_t n = b == 0
                             ? header.size()
                             : std::min<uint64_t>(kDeflateBlock, bytes - static_cast<uint64_t>(b - 1) * kDeflateBlock);
      crc = b == 0 ? crcs[0] : crc32_combine64(crc, crcs[static_cast<std::size_t>(i)], static_cast<z_off64_t>(n));
      write_bytes(out[static_cast<std::size_t>(i)].data(), lens[static_cast<std::size_t>(i)]);
      w.compressed += lens[static_cast<std::size_t>(i)];
    }
  }
  w.crc = static_cast<uint32_t>(crc);
}

void NpzWriter::add(std::string_view name, Dtype dtype, const std::vector<int64_t>& shape, const void* data,
                    bool fortran_order) {
  STRATA_CHECK(file_ != nullptr, "npz: ", quote_path(path_), " is already closed");
  for (int64_t d : shape) STRATA_CHECK(d >= 0, "npz: array ", quote_field(name), " has a negative dimension");
  Written w;
  w.name = std::string(name) + ".npy";
  w.method = compress_ ? 8 : 0;
  w.local_offset = tell();
  const std::string header = make_header(dtype, shape, fortran_order);
  Header h;
  h.shape = shape;
  const uint64_t bytes = static_cast<uint64_t>(h.count()) * itemsize(dtype);
  w.uncompressed = header.size() + bytes;
  const bool zip64 = force_zip64_ || w.uncompressed >= kZip64Threshold;
  w.zip64 = zip64;
  write_local_header(w.name, zip64);
  const auto* p = static_cast<const unsigned char*>(data);
  if (compress_)
    deflate_payload(header, p, bytes, w);
  else
    store_payload(header, p, bytes, w);
  patch_local_header(w, zip64);
  written_.push_back(std::move(w));
}

void NpzWriter::close() {
  STRATA_CHECK(file_ != nullptr, "npz: ", quote_path(path_), " is already closed");
  const uint64_t cd_offset = tell();
  std::string cd;
  for (const Written& w : written_) {
    const bool big_sizes = w.zip64;
    const bool big_offset = w.local_offset >= kMax32 || (w.zip64 && force_zip64_);
    std::string extra;
    if (big_sizes || big_offset) {
      std::string fields;
      if (big_sizes) {
        put64(fields, w.uncompressed);
        put64(fields, w.compressed);
      }
      if (big_offset) put64(fields, w.local_offset);
      put16(extra, 1);
      put16(extra, fields.size());
      extra += fields;
    }
    put32(cd, kCentralSig);
    put16(cd, 45);
    put16(cd, big_sizes || big_offset ? 45 : 20);
    put16(cd, 0);
    put16(cd, w.method);
    put16(cd, 0);
    put16(cd, 0x21);
    put32(cd, w.crc);
    put32(cd, big_sizes ? kMax32 : w.compressed);
    put32(cd, big_sizes ? kMax32 : w.uncompressed);
    put16(cd, w.name.size());
    put16(cd, extra.size());
    put16(cd, 0);  // comment
    put16(cd, 0);  // disk
    put16(cd, 0);  // internal attributes
    put32(cd, uint64_t{0600} << 16);
    put32(cd, big_offset ? kMax32 : w.local_offset);
    cd += w.name;
    cd += extra;
  }
  write_bytes(cd.data(), cd.size());
  const uint64_t n = written_.size();
  std::string end;
  if (n >= 0xffff || cd.size() >= kMax32 || cd_offset >= kMax32 || force_zip64_) {
    const uint64_t z_at = tell();
    put32(end, kZip64EndSig);
    put64(end, 44);
    put16(end, 45);
    put16(end, 45);
    put32(end, 0);
    put32(end, 0);
    put64(end, n);
    put64(end, n);
    put64(end, cd.size());
    put64(end, cd_offset);
    put32(end, kZip64LocatorSig);
    put32(end, 0);
    put64(end, z_at);
    put32(end, 1);
  }
  const bool z = !end.empty();
  put32(end, kEndSig);
  put16(end, 0);
  put16(end, 0);
  put16(end, z ? 0xffff : n);
  put16(end, z ? 0xffff : n);
  put32(end, z ? kMax32 : cd.size());
  put32(end, z ? kMax32 : cd_offset);
  put16(end, 0);
  write_bytes(end.data(), end.size());
  std::unique_ptr<AtomicFile> file = std::move(file_);  // closed, or failed: either way no more writes
  file->commit();
}

void write_npy(const std::string& path, Dtype dtype, const std::vector<int64_t>& shape, const void* data) {
  AtomicFile f(path, "npy");  // Note [Atomic file writes]
  f.write(make_header(dtype, shape));
  Header h;
  h.shape = shape;
  f.write(data, static_cast<std::size_t>(h.count()) * itemsize(dtype));
  f.commit();
}

}  // namespace strata::npy
