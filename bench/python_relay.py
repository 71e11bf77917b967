#!/usr/bin/python3
"""The baseline for the relay benchmark: a single-process Python grpcio relay
of OpenEngine Inference.Generate, in front of the same engine.

It is the leanest relay Python allows: messages are passed through as bytes
(no protobuf parse or re-serialise), one engine stream per router stream, on
grpcio's thread pool. Debian: python3-grpcio.

    /usr/bin/python3 bench/python_relay.py LISTEN_PORT ENGINE_ENDPOINT
"""
import sys
from concurrent import futures

import grpc

METHOD = "/openengine.v1.Inference/Generate"


def main():
    port, engine = int(sys.argv[1]), sys.argv[2]
    channel = grpc.insecure_channel(engine)
    upstream = channel.unary_stream(METHOD)  # bytes in, bytes out

    def generate(request, context):
        metadata = [(k, v) for k, v in context.invocation_metadata()
                    if k.startswith("openengine-")]
        call = upstream(request, metadata=metadata)
        context.add_callback(call.cancel)
        for response in call:
            yield response

    handler = grpc.method_handlers_generic_handler(
        "openengine.v1.Inference",
        {"Generate": grpc.unary_stream_rpc_method_handler(generate)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1100),
                         maximum_concurrent_rpcs=1100)
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    print("python relay on 127.0.0.1:%d -> %s" % (port, engine), flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
