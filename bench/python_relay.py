#!/usr/bin/python3
"""The baseline for the relay benchmarks: a single-process Python grpcio
relay of OpenEngine Inference.Generate, in front of the same engine.

It is the leanest relay Python allows: messages are passed through as bytes
(no protobuf parse or re-serialise), one engine stream per router stream, on
grpcio's thread pool. Debian: python3-grpcio.

    /usr/bin/python3 bench/python_relay.py LISTEN_PORT ENGINE_ENDPOINT [SIDECAR]

With SIDECAR (a sidecar's relay address), the relay's OpenEngine Control
calls (the KV event subscription, load, server information) are passed
through to that sidecar as bytes too, so that a router takes this process
for the worker's relay (dispatch_bench's `python` mode): the router places
on a worker once its relay answers the KV subscription. Generate never
touches the sidecar.
"""
import sys
from concurrent import futures

import grpc

GENERATE = "/openengine.v1.Inference/Generate"
CONTROL = "/openengine.v1.Control/"
# Control's one server-streaming call; the others are unary.
STREAMING_CONTROL = CONTROL + "SubscribeKvEvents"


def forwarded(context):
    """The caller's metadata worth passing on (not gRPC's own)."""
    return [(k, v) for k, v in context.invocation_metadata()
            if k.startswith("openengine-") or k.startswith("outrider-")]


def streaming(upstream):
    def handle(request, context):
        call = upstream(request, metadata=forwarded(context))
        context.add_callback(call.cancel)
        # The upstream's headers at once, as it sent them: a KV
        # subscription's answer is its headers (what the relay serves),
        # long before any event.
        context.send_initial_metadata(call.initial_metadata())
        for response in call:
            yield response
    return grpc.unary_stream_rpc_method_handler(handle)


def unary(upstream):
    def handle(request, context):
        try:
            return upstream(request, metadata=forwarded(context), timeout=10)
        except grpc.RpcError as e:
            context.abort(e.code(), e.details() or "")
    return grpc.unary_unary_rpc_method_handler(handle)


class Relay(grpc.GenericRpcHandler):
    def __init__(self, engine, sidecar):
        self.engine = grpc.insecure_channel(engine)
        self.sidecar = grpc.insecure_channel(sidecar) if sidecar else None
        self.generate = streaming(self.engine.unary_stream(GENERATE))
        self.control = {}

    def service(self, details):
        method = details.method
        if method == GENERATE:
            return self.generate
        if self.sidecar is None or not method.startswith(CONTROL):
            return None
        if method not in self.control:
            if method == STREAMING_CONTROL:
                handler = streaming(self.sidecar.unary_stream(method))
            else:
                handler = unary(self.sidecar.unary_unary(method))
            self.control[method] = handler
        return self.control[method]


def main():
    port, engine = int(sys.argv[1]), sys.argv[2]
    sidecar = sys.argv[3] if len(sys.argv) > 3 else None
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1100),
                         maximum_concurrent_rpcs=1100)
    server.add_generic_rpc_handlers((Relay(engine, sidecar),))
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    print("python relay on 127.0.0.1:%d -> %s%s" % (
        port, engine, " (control: %s)" % sidecar if sidecar else ""),
        flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
