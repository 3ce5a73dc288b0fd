// The compiled half of a tileport wrapper's launch in TileGym's cutile-rs backend:
// reads `ct.launch`'s arguments off the torch tensors themselves and calls the port's
// symbol with the words `tileport_launch.rs` reads, in one C call. Hand-written;
// copied as it is into a TileGym checkout as `tileport_launch.cpp` and built on first
// use against the torch the process imports (`tileport_launch.py`).
//
// Why: packed in Python, each tensor costs four attribute reads that build Python
// objects (`.shape`, `.stride()`, `.dtype`, `.data_ptr()`, about 0.35 us together),
// more than the whole Rust side of the launch. Here they are plain reads of the
// at::Tensor. The words are those the wrapper's Python packer writes, bit for bit;
// whatever that packer would read differently, or refuse with its own message, is
// handed back to it (`launch` returns None) rather than guessed at here.

#include <Python.h>

#include <torch/csrc/autograd/python_variable.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <exception>

namespace {

// The most words one launch has: 16 rank-5 tensors and their neighbours.
constexpr size_t kMaxWords = 256;
// ffi_util's dtype code of each at::ScalarType, as TileGym's `make_tensor_desc` packs
// it; learned from the Python packer (`learn`), kUnknownCode until then.
constexpr int64_t kUnknownCode = INT64_MIN;
constexpr size_t kScalarTypes = 256;
std::array<int64_t, kScalarTypes> dtype_codes;

using Symbol = int32_t (*)(const char*);

class Words {
 public:
  bool push(uint64_t word) {
    if (count_ == kMaxWords) {
      return false;
    }
    data_[count_++] = word;
    return true;
  }
  bool push_signed(int64_t word) { return push(static_cast<uint64_t>(word)); }
  const char* bytes() const { return reinterpret_cast<const char*>(data_.data()); }

 private:
  std::array<uint64_t, kMaxWords> data_{};
  size_t count_ = 0;
};

// A tensor of `rank` as address, dtype code, extents, strides; its CUDA device index
// into `device` when it is the first tensor. False for what the Python packer reads
// differently or refuses with its own message: a torch.Tensor subclass (its
// attributes may be overridden), a non-strided or nested tensor, symbolic sizes, a
// rank not the port's, a dtype not learned yet, a first tensor off CUDA.
bool put_tensor(PyObject* object, size_t rank, Words& words, int64_t& device) {
  if (!THPVariable_CheckExact(object)) {
    return false;
  }
  const at::Tensor& tensor = THPVariable_Unpack(object);
  if (!tensor.defined() || tensor.layout() != c10::kStrided || tensor.is_nested() ||
      tensor.unsafeGetTensorImpl()->has_symbolic_sizes_strides() ||
      static_cast<size_t>(tensor.dim()) != rank) {
    return false;
  }
  const auto scalar_type = static_cast<size_t>(tensor.scalar_type());
  if (scalar_type >= kScalarTypes || dtype_codes[scalar_type] == kUnknownCode) {
    return false;
  }
  if (device < 0) {
    if (!tensor.is_cuda()) {
      return false;
    }
    device = tensor.device().index();
  }
  bool fits = words.push(reinterpret_cast<uintptr_t>(tensor.data_ptr())) &&
              words.push_signed(dtype_codes[scalar_type]);
  for (const int64_t extent : tensor.sizes()) {
    fits = fits && words.push_signed(extent);
  }
  for (const int64_t stride : tensor.strides()) {
    fits = fits && words.push_signed(stride);
  }
  return fits;
}

// A Python int as `struct`'s `q` packs it; false for anything else (struct would call
// __index__ on it) or a value out of range (struct would raise).
bool put_int(PyObject* value, Words& words) {
  if (!PyLong_Check(value)) {
    return false;
  }
  int overflow = 0;
  const long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (overflow != 0 || (number == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  return words.push_signed(number);
}

// `struct`'s `Q`: a Python int in [0, 2**64).
bool put_unsigned(PyObject* value, Words& words) {
  if (!PyLong_Check(value)) {
    return false;
  }
  const unsigned long long number = PyLong_AsUnsignedLongLong(value);
  if (number == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return words.push(number);
}

// `struct`'s `d`: a float, or an int a double holds.
bool put_double(PyObject* value, Words& words) {
  double number = 0.0;
  if (PyFloat_Check(value)) {
    number = PyFloat_AS_DOUBLE(value);
  } else if (PyLong_Check(value)) {
    number = PyLong_AsDouble(value);
    if (number == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
  } else {
    return false;
  }
  uint64_t word = 0;
  std::memcpy(&word, &number, sizeof word);
  return words.push(word);
}

// The wrapper's `bool(value)`, packed as `q`.
bool put_bool(PyObject* value, Words& words) {
  const int truth = PyObject_IsTrue(value);
  if (truth < 0) {
    PyErr_Clear();
    return false;
  }
  return words.push(static_cast<uint64_t>(truth));
}

// One argument by its layout code: '1'-'5' a tensor of that rank, 'q', 'Q', 'd', '?'.
bool put_argument(char code, PyObject* value, Words& words, int64_t& device) {
  switch (code) {
    case 'q':
      return put_int(value, words);
    case 'Q':
      return put_unsigned(value, words);
    case 'd':
      return put_double(value, words);
    case '?':
      return put_bool(value, words);
    default:
      return code >= '1' && code <= '5' &&
             put_tensor(value, static_cast<size_t>(code - '0'), words, device);
  }
}

// ct.launch's grid, one to three ints, padded to three with 1.
bool put_grid(PyObject* grid, Words& words) {
  if (!PyTuple_Check(grid) && !PyList_Check(grid)) {
    return false;
  }
  const Py_ssize_t extents = PySequence_Fast_GET_SIZE(grid);
  if (extents < 1 || extents > 3) {
    return false;
  }
  for (Py_ssize_t axis = 0; axis < 3; ++axis) {
    if (axis < extents) {
      if (!put_int(PySequence_Fast_GET_ITEM(grid, axis), words)) {
        return false;
      }
    } else if (!words.push(1)) {
      return false;
    }
  }
  return true;
}

// The stream's handle: an int, or the `cuda_stream` of a torch.cuda.Stream.
bool put_stream(PyObject* stream, Words& words) {
  if (PyLong_Check(stream)) {
    return put_unsigned(stream, words);
  }
  PyObject* handle = PyObject_GetAttrString(stream, "cuda_stream");
  if (handle == nullptr) {
    PyErr_Clear();
    return false;
  }
  const bool put = put_unsigned(handle, words);
  Py_DECREF(handle);
  return put;
}

bool pack(const char* layout, Py_ssize_t parameters, PyObject* args, PyObject* grid,
          PyObject* stream, Words& words) {
  if (!PyTuple_Check(args) && !PyList_Check(args)) {
    return false;
  }
  if (PySequence_Fast_GET_SIZE(args) != parameters) {
    return false;  // the Python packer says how many the symbol takes
  }
  int64_t device = -1;
  for (Py_ssize_t i = 0; i < parameters; ++i) {
    if (!put_argument(layout[i], PySequence_Fast_GET_ITEM(args, i), words, device)) {
      return false;
    }
  }
  // A launch of no tensor runs on the current device: the Python packer asks torch.
  return device >= 0 && put_grid(grid, words) && words.push_signed(device) &&
         put_stream(stream, words);
}

// launch(symbol, layout, args, grid, stream) -> int | None
//
// Calls the symbol at address `symbol` with `args` (`ct.launch`'s tuple, one layout
// code per parameter), `grid` and `stream` packed as its words; returns its rc, or
// None where the Python packer must make this launch (nothing was called then).
PyObject* launch(PyObject* /*module*/, PyObject* const* argv, Py_ssize_t argc) {
  if (argc != 5 || !PyBytes_Check(argv[1])) {
    PyErr_SetString(PyExc_TypeError, "launch(symbol, layout: bytes, args, grid, stream)");
    return nullptr;
  }
  void* address = PyLong_AsVoidPtr(argv[0]);
  if (address == nullptr) {
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_ValueError, "launch: the symbol's address is null");
    }
    return nullptr;
  }
  Words words;
  bool packed = false;
  try {
    packed = pack(PyBytes_AS_STRING(argv[1]), PyBytes_GET_SIZE(argv[1]), argv[2], argv[3],
                  argv[4], words);
  } catch (const std::exception&) {
    packed = false;  // torch refused a read (a tensor without storage, say)
  }
  if (PyErr_Occurred()) {
    return nullptr;
  }
  if (!packed) {
    Py_RETURN_NONE;
  }
  const auto symbol = reinterpret_cast<Symbol>(address);
  int32_t rc = 0;
  // The first launch of an entry compiles it, which takes long: other threads run.
  Py_BEGIN_ALLOW_THREADS
  rc = symbol(words.bytes());
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(rc);
}

// learn(tensor, code) -> None: `code` is ffi_util's dtype code of tensor's dtype.
PyObject* learn(PyObject* /*module*/, PyObject* const* argv, Py_ssize_t argc) {
  if (argc != 2 || !THPVariable_Check(argv[0]) || !PyLong_Check(argv[1])) {
    PyErr_SetString(PyExc_TypeError, "learn(tensor, code: int)");
    return nullptr;
  }
  const long long code = PyLong_AsLongLong(argv[1]);
  if (code == -1 && PyErr_Occurred()) {
    return nullptr;
  }
  const auto scalar_type = static_cast<size_t>(THPVariable_Unpack(argv[0]).scalar_type());
  if (scalar_type < kScalarTypes) {
    dtype_codes[scalar_type] = code;
  }
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(launch)),
     METH_FASTCALL, "launch(symbol, layout, args, grid, stream) -> rc, or None"},
    {"learn", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(learn)),
     METH_FASTCALL, "learn(tensor, code): the dtype code of tensor's dtype"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_tileport_launch",
    "Packs a tileport launch off torch tensors and calls its cutile-rs symbol.",
    -1,
    methods,
};

}  // namespace

PyMODINIT_FUNC PyInit__tileport_launch() {
  dtype_codes.fill(kUnknownCode);
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) {
    return nullptr;
  }
  if (PyModule_AddStringConstant(module, "TORCH_VERSION", TILEPORT_TORCH_VERSION) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
