# Writes a copy of one of Debian's etcd .proto files (golang-etcd-server-dev)
# without what only Go's gogoproto and grpc-gateway use: the gogoproto and
# google/api imports, the gogoproto file options and the google.api.http
# method options. The messages, fields and services are untouched, so the
# C++ classes protoc generates speak etcd's v3 wire format.
#   cmake -DIN=rpc.proto -DOUT=stripped/rpc.proto -P strip_etcd_proto.cmake
file(READ "${IN}" text)
string(REGEX REPLACE "import \"gogoproto/[^\"]*\";" "" text "${text}")
string(REGEX REPLACE "import \"google/api/[^\"]*\";" "" text "${text}")
string(REGEX REPLACE "option \\(gogoproto\\.[a-z_]+\\) = [a-z]+;" "" text "${text}")
# The http option's body may nest one level (additional_bindings { ... }).
string(REGEX REPLACE "option \\(google\\.api\\.http\\) = {([^{}]*{[^{}]*})*[^{}]*};" ""
       text "${text}")
if(text MATCHES "gogoproto|google\\.api")
  message(FATAL_ERROR "${IN}: an annotation this script does not strip is left "
                      "(farm/strip_etcd_proto.cmake)")
endif()
file(WRITE "${OUT}" "${text}")
