"""An OTLP receiver for claij's telemetry tests, over HTTP (POSTs to /v1/traces and
/v1/metrics) or, with --grpc, over gRPC (the OTLP trace and metrics services, grpcio).
Each export is decoded with the official protobuf messages (opentelemetry-proto); every
span is appended to SPANS as one JSON line (trace, span and parent ids in hex, name,
kind, start and end in ns, status code, attributes, service) and every metric data point
to METRICS (the metric's name, its attributes, a sum's or gauge's value or a histogram's
count and sum). Prints its port on stdout once it listens.

    python receiver.py SPANS.jsonl METRICS.jsonl [--grpc]
"""

import json
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = sys.argv[1]
METRICS = sys.argv[2]
GRPC = "--grpc" in sys.argv[3:]
LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def keep_spans(request):
    with LOCK, open(OUT, "a") as out:
        for resource in request.resource_spans:
            service = {a.key: value(a.value) for a in resource.resource.attributes}
            for scope in resource.scope_spans:
                for span in scope.spans:
                    out.write(json.dumps({
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": span.kind,
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "status": span.status.code,
                        "attributes": {a.key: value(a.value) for a in span.attributes},
                        "links": [{"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()}
                                  for link in span.links],
                        "service": service.get("service.name"),
                    }) + "\n")


def keep_metrics(request):
    with LOCK, open(METRICS, "a") as out:
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    kind = metric.WhichOneof("data")
                    for point in getattr(metric, kind).data_points:
                        line = {
                            "metric": metric.name,
                            "kind": kind,
                            "attributes": {a.key: value(a.value) for a in point.attributes},
                        }
                        if kind == "histogram":
                            line["count"] = point.count
                            line["sum"] = point.sum
                        else:
                            line["value"] = point.as_int if point.HasField("as_int") else point.as_double
                        out.write(json.dumps(line) + "\n")


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path == "/v1/metrics":
            request = ExportMetricsServiceRequest()
            request.ParseFromString(body)
            keep_metrics(request)
            self.reply(ExportMetricsServiceResponse().SerializeToString())
        elif self.path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            keep_spans(request)
            self.reply(ExportTraceServiceResponse().SerializeToString())
        else:
            self.send_response(404)
            self.end_headers()

    def reply(self, reply):
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def serve_grpc():
    import grpc
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    class Traces(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):  # noqa: N802 (the service's name)
            keep_spans(request)
            return ExportTraceServiceResponse()

    class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
        def Export(self, request, context):  # noqa: N802
            keep_metrics(request)
            return ExportMetricsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


if GRPC:
    serve_grpc()
else:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
