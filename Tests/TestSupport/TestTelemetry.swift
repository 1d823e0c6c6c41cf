import CoreMetrics
public import InMemoryTracing
import Instrumentation
public import MetricsTestKit

/// The host's metrics and tracing systems as a test process bootstraps them: once (both are
/// process-wide, and every test target runs in one process). Tests tell their own records apart by
/// a dimension of their own (the dev server's issuer, a profile or table name).
public enum TestTelemetry {
    public static let systems: (metrics: TestMetrics, tracer: InMemoryTracer) = {
        let metrics = TestMetrics()
        let tracer = InMemoryTracer()
        MetricsSystem.bootstrap(metrics)
        InstrumentationSystem.bootstrap(tracer)
        return (metrics, tracer)
    }()

    /// How many values `label` recorded with `dimensions` so far (0 when none).
    public static func timerCount(_ label: String, _ dimensions: [(String, String)]) -> Int {
        (try? systems.metrics.expectTimer(label, dimensions))?.values.count ?? 0
    }
}
