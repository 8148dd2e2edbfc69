#pragma once
/// @file
/// NumPy's .npy and .npz files: reading (streamed, member by member) and writing (stored or
/// deflate-compressed, as np.savez / np.savez_compressed), with errors that name the file, the
/// member and the byte offset.
///
/// Note [npy and npz formats]
/// - .npy: the magic "\x93NUMPY", a version byte pair (1.0: 2-byte header length; 2.0 and 3.0:
///   4-byte; 3.0 allows UTF-8 in the header), the little-endian header length, then a Python dict
///   literal `{'descr': '<i4', 'fortran_order': False, 'shape': (3, 26), }` padded with spaces and a
///   newline so the data starts at a multiple of 64 bytes. Supported dtypes: <i4 <i8 <f4 <f8 |u1
///   |b1 (little-endian; others are refused naming the descr). The data follows in C order, or in
///   Fortran order when the header says so: readers see `fortran_order` and must ask for it
///   (read_array refuses it); the Criteo pipeline needs it because the reference's processed file
///   holds X_cat as a transposed (Fortran-order) float64 array.
/// - .npz: a zip archive of `<name>.npy` members, stored (np.savez) or raw-deflate (method 8,
///   np.savez_compressed). Sizes and offsets of 4 GiB and more use the Zip64 extra field and the
///   Zip64 end-of-central-directory records (read and written). The central directory is
///   authoritative (as in Python's zipfile); the local header only locates the data. A member's
///   CRC-32 and size are checked once its data has been read to the end.
/// - Writing deflates in parallel (parallel_for over 4 MiB blocks, each ended by a sync flush
///   except the last; the CRCs are combined), which produces one valid deflate stream, and writes
///   to `<path>.tmp-<pid>` renamed over `path` by close(), so readers never see a partial file.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata {
class AtomicFile;  // core/file.h
}  // namespace strata

namespace strata::npy {

enum class Dtype : uint8_t { I4, I8, F4, F8, U1, B1 };

/// "<i4", "<i8", "<f4", "<f8", "|u1", "|b1".
const char* descr(Dtype dtype);
/// Bytes per element.
std::size_t itemsize(Dtype dtype);

/// A parsed .npy header.
struct Header {
  Dtype dtype = Dtype::I4;
  std::vector<int64_t> shape;
  bool fortran_order = false;
  /// Bytes from the start of the .npy data to the array data (magic, lengths, dict, padding).
  uint64_t header_bytes = 0;
  /// Elements (the product of the shape; 1 for a 0-d array).
  int64_t count() const;
  /// Bytes of array data.
  uint64_t data_bytes() const { return static_cast<uint64_t>(count()) * itemsize(dtype); }
  /// "(3, 26)" as numpy prints it.
  std::string shape_string() const;
};

/// The header bytes np.save writes for this array (version 1.0, or 2.0 when the dict is longer
/// than 65535 bytes), padded to a multiple of 64.
std::string make_header(Dtype dtype, const std::vector<int64_t>& shape, bool fortran_order = false);

/// Where read_header gets the bytes of .npy data from.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// Reads up to n bytes; returns how many (0 at the end).
  virtual std::size_t read_some(void* dst, std::size_t n) = 0;
};
/// Parses the header at the start of `in`, leaving `in` at the array data. `where` names the file
/// (and member) in errors, which also give the byte offset in the .npy data.
Header read_header(ByteSource& in, const std::string& where);

/// Streams one .npz member (or a plain .npy file): the header is parsed on open, then read()
/// delivers the array data in order. finish() checks that the data was read to the end, the
/// decompressed size and the CRC-32; read() past the data, corrupt deflate data or a file that ends
/// early throw strata::Error naming the file, member and byte offset.
class MemberReader {
 public:
  virtual ~MemberReader() = default;
  const Header& header() const { return header_; }
  /// Reads exactly n bytes of array data.
  virtual void read(void* dst, std::size_t n) = 0;
  /// Checks the end of the member (size, CRC). Call after the last read().
  virtual void finish() = 0;
  /// For a stored (uncompressed) member: the file offset of the array data (for mmap), else -1.
  virtual int64_t data_file_offset() const = 0;

 protected:
  Header header_;
};

/// An .npz archive opened for reading: the central directory is read once; members are opened one
/// at a time, each with its own file handle (so several can be read in parallel).
class NpzReader {
 public:
  /// Throws strata::Error naming the file when it cannot be opened, is not a zip archive (no
  /// end-of-central-directory record: also a truncated file), or its directory is corrupt.
  explicit NpzReader(std::string path);
  const std::string& path() const { return path_; }
  /// The array names in archive order (member names without ".npy").
  std::vector<std::string> names() const;
  bool contains(std::string_view name) const;
  /// Opens array `name`; throws naming the file and the arrays it has when it is missing.
  std::unique_ptr<MemberReader> open(std::string_view name) const;
  /// File size in bytes.
  uint64_t file_size() const { return file_size_; }

  struct Entry {
    std::string name;     // member name ("X_cat.npy")
    uint16_t method = 0;  // 0 stored, 8 deflate
    uint32_t crc = 0;
    uint64_t compressed = 0;
    uint64_t uncompressed = 0;
    uint64_t local_offset = 0;
  };

 private:
  void read_directory(std::FILE* f);
  std::string path_;
  uint64_t file_size_ = 0;
  std::vector<Entry> entries_;
};

/// Opens a plain .npy file as a MemberReader.
std::unique_ptr<MemberReader> open_npy(const std::string& path);

/// A whole array in memory (C order).
template <typename T>
struct Array {
  Header header;
  std::vector<T> data;
};

/// Reads array `name` whole as T (T's dtype must match: int32_t <i4, int64_t <i8, float <f4,
/// double <f8, uint8_t |u1 or |b1); refuses Fortran order. For small arrays and tests.
template <typename T>
Array<T> read_array(const NpzReader& npz, std::string_view name);

/// Reads an integer array of any supported dtype (floats must hold integers) as int64, any order
/// flattened in storage order; refuses values that are not integers. For counts and sizes.
std::vector<int64_t> read_integers(const NpzReader& npz, std::string_view name, Header* header = nullptr);

/// Writes an .npz archive (see Note [npy and npz formats]).
class NpzWriter {
 public:
  /// `compress`: deflate (np.savez_compressed) at zlib `level` (1 fastest .. 9 smallest; numpy
  /// uses 6), else stored (np.savez). Throws naming the file when it cannot be created.
  NpzWriter(std::string path, bool compress, int level = 1);
  ~NpzWriter();
  NpzWriter(const NpzWriter&) = delete;
  NpzWriter& operator=(const NpzWriter&) = delete;
  /// Appends array `name` of `shape` from `data` (shape's product × itemsize bytes) in C order, or
  /// in Fortran order when `fortran_order` (as np.save writes a transposed array).
  void add(std::string_view name, Dtype dtype, const std::vector<int64_t>& shape, const void* data,
           bool fortran_order = false);
  template <typename T>
  void add(std::string_view name, const std::vector<int64_t>& shape, const T* data);
  /// Writes the central directory and renames the file into place. Throws on I/O errors.
  void close();
  /// Gives every later member Zip64 records whatever its size (as Python's force_zip64), so
  /// tests exercise the 4 GiB format on small files.
  void force_zip64() { force_zip64_ = true; }

 private:
  struct Written {
    std::string name;
    uint16_t method;
    uint32_t crc;
    uint64_t compressed, uncompressed, local_offset;
    bool zip64;
  };
  void write_bytes(const void* p, std::size_t n);
  uint64_t tell() const;
  void write_local_header(const std::string& name, bool zip64);
  void patch_local_header(const Written& w, bool zip64);
  void deflate_payload(const std::string& header, const unsigned char* data, uint64_t bytes, Written& w);
  void store_payload(const std::string& header, const unsigned char* data, uint64_t bytes, Written& w);
  std::string path_;
  std::unique_ptr<AtomicFile> file_;  // Note [Atomic file writes]; null once closed or failed
  bool compress_;
  int level_;
  bool force_zip64_ = false;
  std::vector<Written> written_;
};

/// Writes one .npy file (np.save) atomically.
void write_npy(const std::string& path, Dtype dtype, const std::vector<int64_t>& shape, const void* data);

/// The Dtype of T (int32_t, int64_t, float, double, uint8_t; bool maps to B1).
template <typename T>
constexpr Dtype dtype_of();
template <>
constexpr Dtype dtype_of<int32_t>() {
  return Dtype::I4;
}
template <>
constexpr Dtype dtype_of<int64_t>() {
  return Dtype::I8;
}
template <>
constexpr Dtype dtype_of<float>() {
  return Dtype::F4;
}
template <>
constexpr Dtype dtype_of<double>() {
  return Dtype::F8;
}
template <>
constexpr Dtype dtype_of<uint8_t>() {
  return Dtype::U1;
}
template <>
constexpr Dtype dtype_of<bool>() {
  return Dtype::B1;
}

template <typename T>
void NpzWriter::add(std::string_view name, const std::vector<int64_t>& shape, const T* data) {
  add(name, dtype_of<T>(), shape, data);
}

}  // namespace strata::npy
