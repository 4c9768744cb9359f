"""The one seam over prometheus-api-client: bounded, retried, classified Prometheus reads.

The triage answer is only useful within seconds, and prometheus-api-client 0.7.2 is
unsafe by default (see shared/reference/reliability.md §2.3): no timeout, a urllib3
`Retry` that turns a 503 into `RetryError` after ~6 s and obeys `Retry-After: 20` for a
minute, stalls that take `(retries+1) × timeout`, `JSONDecodeError` on an HTML 200 from
an auth proxy, and Prometheus's `warnings` (partial data) silently dropped.

So `PrometheusSource` owns the transport and uses the library where it is safe:

- It hands `PrometheusConnect` a `requests.Session` of its own (`_DeadlineSession`)
  whose every send gets `timeout = what is left of the round's deadline`, is counted,
  and keeps the raw `Response`. The adapter the library mounts with its own urllib3
  `Retry` is replaced by one with no retries at all, so retrying is done here, where
  the deadline is known. Replies are always read from that raw response, because the
  library reports HTTP errors as a repr of the body and raises on an HTML 200.
- `metric_names` goes through `PrometheusConnect.get_label_values`.
- Queries (`/api/v1/query`, `/api/v1/query_range`) do NOT go through
  `custom_query`/`custom_query_range`, but through the same Session directly: those
  return only `data.result`, dropping `warnings`, `infos` and `resultType`, and
  `custom_query_range` rounds start and end to whole seconds. Reading the envelope
  from the captured response as well would parse every reply twice: measured 4.1 s
  instead of 2.3 s for a round of 20 queries × 64 series × 1440 points.
- A *round* (all the queries of one refresh) runs on a thread pool under ONE deadline;
  the caller gets its answer by `timeout` (plus a few milliseconds) whatever the server
  does, and queries still unanswered then come back as `timeout after …`.
- Retries: only transient failures (connection refused/reset, timeouts, HTTP
  502/503/504), at most `max_retries`, exponential backoff with jitter that never runs
  past the deadline. A `Retry-After` longer than what is left is not waited for: the
  query fails at once saying so. 4xx and `status: error` replies (bad_data,
  execution, …) are final, and so is a 503 whose errorType is `timeout` (the server
  already spent its query timeout; asking again only doubles the load).

Everything that goes wrong becomes a `PrometheusError` (a `SignalError`) or, for
queries, `QueryResult.error`: one line a person can act on. Credentials are never
logged or put in messages: URLs are shown without user info and without the query.

The seam is a package split by concern: `errors` (what callers catch), `transport` (the
deadline-bound Session, HTTP and connection errors mapped to one-line failures),
`replies` (the result types and the parsing and validation of a reply's data),
`streamed` (a query's body read as it arrives, series by series when it is large),
`rounds` (one deadline over a pool of queries, with bounded retries) and `source`
(`PrometheusSource`, the reads callers make). Names with a leading underscore are
private to the package; this module is its public face.
"""

from signals.prometheus.errors import (
    PrometheusBadReply,
    PrometheusError,
    PrometheusRejected,
    PrometheusUnavailable,
)
from signals.prometheus.replies import ApiReply, FloatArray, QueryResult, SeriesData
from signals.prometheus.rounds import Progress, ReadProgress
from signals.prometheus.source import PrometheusSource

__all__ = [
    "ApiReply",
    "FloatArray",
    "Progress",
    "PrometheusBadReply",
    "PrometheusError",
    "PrometheusRejected",
    "PrometheusSource",
    "PrometheusUnavailable",
    "QueryResult",
    "ReadProgress",
    "SeriesData",
]
