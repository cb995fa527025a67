#!/usr/bin/env python3
# Writes the seed corpus of rpc_fuzz (tests/fuzz/corpus/rpc/): records of
# [op][length, 2 bytes LE][payload] as rpc_fuzz.cc reads them, with payloads
# encoded by protoc from the text protos below. Run from the repository root:
#   python3 tests/fuzz/make_rpc_seeds.py
import subprocess, struct, os
def enc(msg, text):
    return subprocess.run(['protoc','--encode=tether.v1.'+msg,'-Iproto','proto/tether/v1/tether.proto'],
                          input=text.encode(), capture_output=True, check=True).stdout
def rec(op, payload):
    return bytes([op]) + struct.pack('<H', len(payload)) + payload
def split(msg_bytes, data=b''):
    assert len(msg_bytes) < 256
    return bytes([len(msg_bytes)]) + msg_bytes + data
seeds = {}
create = enc('CallRequest', 'create_vm {}')
swap = enc('CallRequest', 'invoke { vm_id: 1 function: "swap" args { int_value: 1 } args { int_value: 2 } }')
alloc = enc('CallRequest', 'alloc_tensor { tensor { dtype { code: 2 bits: 32 lanes: 1 } shape: 4 shape: 4 device { type: 1 } } }')
fill = enc('CallRequest', 'fill_random { tensor_id: 2 seed: 1 low: 0 high: 1 }')
timeit = enc('CallRequest', 'time_evaluator { vm_id: 1 function: "swap" device { type: 1 } options { number: 1 repeat: 2 } args { int_value: 1 } args { int_value: 2 } }')
info = enc('CallRequest', 'get_function_info { vm_id: 1 }')
free = enc('CallRequest', 'free_objects { ids: 2 }')
seeds['vm'] = rec(0, create) + rec(0, swap) + rec(8, swap) + rec(0, timeit) + rec(0, info)
seeds['tensor'] = rec(0, alloc) + rec(0, fill) + rec(2, enc('DownloadTensorRequest', 'tensor_id: 1 chunk_bytes: 16')) + rec(0, free)
hdr = enc('UploadTensorRequest', 'header { tensor { dtype { code: 2 bits: 32 lanes: 1 } shape: 4 device { type: 1 } } }')
seeds['upload'] = rec(1, split(hdr, b'\x00'*16)) + rec(2, enc('DownloadTensorRequest', 'tensor_id: 1'))
mod = enc('UploadModuleRequest', 'header { sha256: "' + 'ab'*32 + '" size_bytes: 8 }')
seeds['module'] = rec(3, split(mod, b'12345678')) + rec(6, enc('HasModuleRequest', 'sha256: "' + 'ab'*32 + '"'))
seeds['session'] = rec(4, enc('OpenSessionRequest', 'idle_timeout_ms: 5000 client_name: "x"')) + rec(5, enc('KeepAliveRequest', '')) + rec(0x15, enc('CloseSessionRequest', '')) + rec(7, enc('HandshakeRequest', 'client_protocol { major: 1 }'))
frame = swap
seeds['direct'] = rec(0, create) + rec(9, b'\x01' + struct.pack('<I', len(frame)) + frame)
for k, v in seeds.items():
    open(f'tests/fuzz/corpus/rpc/{k}', 'wb').write(v)
print({k: len(v) for k, v in seeds.items()})
