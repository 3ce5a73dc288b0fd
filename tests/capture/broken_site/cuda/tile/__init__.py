raise ImportError("libcuda.so.1: cannot open shared object file")
