# Records test/helpers/llama-quantize-types.json: llama.cpp's own llama_model_quantize (the libllama
# node-llama-cpp ships) run on an F32 GGUF, so that the types it picks per tensor are the judge of
# `tsllm quantize`'s. Usage (Linux x64): python3 llama-quantize-types.py IN.gguf OUT.gguf FTYPE [pure] [PATTERN=GGML_TYPE_ID]...
# then read OUT's tensor types (tsllm inspect, or readGGUFHeader). The inputs are writeRandomModel
# files with the specs the JSON lists; FTYPE is llama.h's llama_ftype number.
import ctypes, sys, os
D = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/")
for f in ["libggml-base.so", "libggml.v0.4.0.so"]:
    ctypes.CDLL(D + f, mode=ctypes.RTLD_GLOBAL)
L = ctypes.CDLL(D + "libllama.v0.4.0.so", mode=ctypes.RTLD_GLOBAL)
class P(ctypes.Structure):
    _fields_ = [("nthread", ctypes.c_int32), ("ftype", ctypes.c_int32), ("output_tensor_type", ctypes.c_int32), ("token_embedding_type", ctypes.c_int32),
                ("allow_requantize", ctypes.c_bool), ("quantize_output_tensor", ctypes.c_bool), ("only_copy", ctypes.c_bool), ("pure", ctypes.c_bool),
                ("keep_split", ctypes.c_bool), ("dry_run", ctypes.c_bool), ("imatrix", ctypes.c_void_p), ("kv_overrides", ctypes.c_void_p),
                ("tt_overrides", ctypes.c_void_p), ("prune_layers", ctypes.c_void_p), ("max_buf_size", ctypes.c_size_t)]
L.llama_model_quantize_default_params.restype = P
L.llama_model_quantize.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(P)]
L.llama_model_quantize.restype = ctypes.c_uint32
L.llama_backend_init()
inp, out, ftype = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = L.llama_model_quantize_default_params()
p.ftype = ftype; p.nthread = 1
# optional: "pure", and PATTERN=GGML_TYPE_ID overrides (llama-quantize --pure / --tensor-type)
class TT(ctypes.Structure):
    _fields_ = [("pattern", ctypes.c_char_p), ("type", ctypes.c_int32)]
extra = sys.argv[4:]
p.pure = "pure" in extra
tts = [a.split("=") for a in extra if "=" in a]
if tts:
    arr = (TT * (len(tts) + 1))(*[TT(a.encode(), int(b)) for a, b in tts], TT(None, 0))
    p.tt_overrides = ctypes.cast(arr, ctypes.c_void_p)
rc = L.llama_model_quantize(inp.encode(), out.encode(), ctypes.byref(p))
sys.exit(rc)
