// The optional tensor-facts reader of the generated wrapper beside it
// (tileport_kernels.py); hand-written, and copied with the crate into every workspace
// and bundle.
//
// A repeated call's key is every tensor's dtype, device, extents and strides, and its
// addresses. Read from Python that is four attribute reads per tensor, each building
// Python objects; here they are read off the at::Tensor directly and packed into one
// bytes object, which compares with a memcmp. Built against the torch the process
// imports (`python tileport_kernels.py build-tensor-facts`); the wrapper uses it only
// when its torch version is the one imported, and reads the facts in Python otherwise.

#include <Python.h>

#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <exception>
#include <vector>

namespace {

// Marks a single tensor in the packed key; a list is marked by its length (>= 0).
constexpr int64_t kSingleTensor = -1;

// What `layout` gathers: the packed facts, the addresses, the first tensor's device.
struct Reading {
  std::vector<int64_t> key;
  PyObject* addresses;
  int64_t first_index = -1;
  bool seen_tensor = false;
};

// Appends one tensor's facts; false for anything the Python reader would read
// differently or the library must refuse with its own message: a torch.Tensor
// subclass (its attributes may be overridden), a non-strided or nested tensor,
// symbolic sizes. Sets a Python error only when Python itself failed.
bool read_tensor(PyObject* object, Reading& reading) {
  if (!THPVariable_CheckExact(object)) {
    return false;
  }
  const at::Tensor& tensor = THPVariable_Unpack(object);
  if (!tensor.defined() || tensor.layout() != c10::kStrided || tensor.is_nested() ||
      tensor.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
    return false;
  }
  const c10::Device device = tensor.device();
  const auto sizes = tensor.sizes();
  const auto strides = tensor.strides();
  std::vector<int64_t>& key = reading.key;
  key.push_back(static_cast<int64_t>(tensor.scalar_type()));
  key.push_back(static_cast<int64_t>(device.type()) * 65536 + device.index());
  key.push_back(static_cast<int64_t>(sizes.size()));
  key.insert(key.end(), sizes.begin(), sizes.end());
  key.insert(key.end(), strides.begin(), strides.end());
  PyObject* address = PyLong_FromVoidPtr(tensor.data_ptr());
  if (address == nullptr) {
    return false;
  }
  const int appended = PyList_Append(reading.addresses, address);
  Py_DECREF(address);
  if (!reading.seen_tensor) {
    reading.first_index = device.is_cuda() ? device.index() : -1;
    reading.seen_tensor = true;
  }
  return appended == 0;
}

// One argument: a tensor, or a list or tuple of them (its length goes in the key).
bool read_array(PyObject* array, Reading& reading) {
  if (!PyList_Check(array) && !PyTuple_Check(array)) {
    reading.key.push_back(kSingleTensor);
    return read_tensor(array, reading);
  }
  const Py_ssize_t length = PySequence_Fast_GET_SIZE(array);
  reading.key.push_back(static_cast<int64_t>(length));
  for (Py_ssize_t j = 0; j < length; ++j) {
    if (!read_tensor(PySequence_Fast_GET_ITEM(array, j), reading)) {
      return false;
    }
  }
  return true;
}

// layout(arrays: tuple) -> (bytes, list[int], int) | None
//
// The packed facts of `arrays` (tensors, and lists or tuples of tensors), every
// tensor's address in parameter order, and the first tensor's CUDA device index (-1
// when it is not on a CUDA device). None when an array is anything else, or holds no
// tensor at all: the caller reads those in Python.
PyObject* layout(PyObject* /*module*/, PyObject* arrays) {
  if (!PyTuple_Check(arrays)) {
    PyErr_SetString(PyExc_TypeError, "layout() takes a tuple of arrays");
    return nullptr;
  }
  Reading reading;
  reading.key.reserve(64);
  reading.addresses = PyList_New(0);
  if (reading.addresses == nullptr) {
    return nullptr;
  }
  bool readable = true;
  try {
    const Py_ssize_t count = PyTuple_GET_SIZE(arrays);
    for (Py_ssize_t i = 0; i < count && readable; ++i) {
      readable = read_array(PyTuple_GET_ITEM(arrays, i), reading);
    }
  } catch (const std::exception&) {
    readable = false;  // torch refused a read (a tensor without storage, say)
  }
  if (PyErr_Occurred()) {
    Py_DECREF(reading.addresses);
    return nullptr;
  }
  if (!readable || !reading.seen_tensor) {
    Py_DECREF(reading.addresses);
    Py_RETURN_NONE;
  }
  PyObject* packed = PyBytes_FromStringAndSize(
      reinterpret_cast<const char*>(reading.key.data()),
      static_cast<Py_ssize_t>(reading.key.size() * sizeof(int64_t)));
  if (packed == nullptr) {
    Py_DECREF(reading.addresses);
    return nullptr;
  }
  return Py_BuildValue("(NNL)", packed, reading.addresses,
                       static_cast<long long>(reading.first_index));
}

PyMethodDef methods[] = {
    {"layout", layout, METH_O,
     "layout(arrays) -> (packed facts, addresses, first device index) or None"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_tileport_tensor_facts",
    "Reads torch tensors' layout facts for tileport_kernels' repeated-call key.",
    -1,
    methods,
};

}  // namespace

PyMODINIT_FUNC PyInit__tileport_tensor_facts() {
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
