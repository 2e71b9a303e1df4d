#!/usr/bin/env bash
# Writes docs/api.md: a curl example for every route, each run against a live `server --dev`
# (as `make run` starts it) with its real answer. Usage: bash scripts/api-examples.sh [BASE_URL]
# (default http://127.0.0.1:8080). Creates a few objects in the organization acme.

set -euo pipefail
BASE=${1:-http://127.0.0.1:8080}
OUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/docs/api.md"
ADMIN=dev-only-token-acme-super-admin-7c1f0e9a4b2d4c8e9f3a6b5d
MEMBER=dev-only-token-acme-member-3e8b2a1c9d7f4e6a8b0c2d4e
SUFFIX=$(date +%s | tail -c 5)

{
cat <<'HEAD'
# The API by example

Every example below was run against `make run` (development mode: the embedded account platform
and its demo tokens, printed at start) by `scripts/api-examples.sh`, which wrote this page with
the answers it got. `$ADMIN` is the demo super_admin of `acme`, `$MEMBER` its member.

```sh
export BASE=http://127.0.0.1:8080
export ADMIN=dev-only-token-acme-super-admin-7c1f0e9a4b2d4c8e9f3a6b5d
export MEMBER=dev-only-token-acme-member-3e8b2a1c9d7f4e6a8b0c2d4e
```

Errors are `application/problem+json` with a stable `code` (see "The rules" below); the full
schema is served at `GET /v1/openapi.json`.

## The rules

What every route shares. The OpenAPI document (`GET /v1/openapi.json`, or `/docs` in a browser)
gives each route's own shapes and statuses.

### Errors

Every 4xx and 5xx is `application/problem+json` (RFC 9457): `type` (`about:blank`), `title`,
`status`, `detail`, `request_id` (also in the `X-Request-Id` header), and a stable `code` a client
can switch on. A 422 also has `errors`: one `{field, message}` per problem, `field` a path such as
`node_pools[0].count`.

| Status | `code` | When |
|---|---|---|
| 400 | `organization_required`, `invalid_idempotency_key`, `invalid_query`, `unknown_zone`, `unknown_version`, `unknown_machine_tier`, `phase_not_provisioned`, `public_exposure_unavailable`, `upgrade_not_allowed` | what the caller cannot fix in the body |
| 401 | `unauthorized` | no usable bearer token (see Authentication); with `WWW-Authenticate: Bearer` |
| 402 | `insufficient_credit` | a prepaid organization without credit adds nodes |
| 403 | `forbidden`, `assistant_not_allowed` | not a member (reads) or not super_admin (writes); the AI assistant's limits |
| 404 | `not_found` | unknown or gone (an organization, a cluster, an object under it), or another person's approval |
| 409 | `name_conflict`, `idempotency_key_reused`, `idempotency_key_in_progress`, `change_in_flight`, `last_pool`, `exposure_mismatch`, `invalid_state`, `cluster_not_provisioned`, `cluster_deleting`, `cluster_failed`, `last_credential`, `concurrent_modification` | the state of things forbids it now |
| 412 | `precondition_failed` | an `If-Match` write on an object that changed since it was read (see Concurrent edits) |
| 413 | `payload_too_large` | a body over 1 MiB |
| 415 | `unsupported_media_type` | a body that is not `application/json` |
| 422 | `validation_failed` | every other body rule |
| 500 | `internal_error` | a fault of the service (the detail says nothing more; the log does) |
| 502 | `auth_backend_unavailable` | the account platform did not answer |
| 503 | `capacity_exhausted`, `service_unavailable` | with `Retry-After`; a retry may succeed |

Authentication is checked first, then the query parameters: an out-of-range `page` is 400
`invalid_query` whatever the organization. A cluster of another organization is 403 `forbidden`
(not a member), and a writer who is super_admin nowhere is refused before any object is loaded;
nothing else about an object is told to someone who may not see it.

### Authentication

`Authorization: Bearer <token>`, the scheme in any case. The four 401 texts: `Authorization header
missing`, `scheme must be Bearer`, `Bearer token is empty`, `invalid bearer token` (the account
platform does not know the token).

### Organizations

Collection reads (the cluster list, the catalog, auth servers) are about the organization named
by the `organization` query parameter, else the `X-Platform-Organization` header, else the
caller's preferred organization (400 `organization_required` when there is none). A value shaped
like a UUID is an id, anything else a slug. Creates name it in the body's `organization` field
(query and header are not read); routes under an object are about the object's organization.
Reads need member rights (member, project_admin or super_admin), writes super_admin.

### Idempotency

`Idempotency-Key` (8-255 characters of letters, digits, `_`, `-`, `:` and `.`) is honoured on
every POST and DELETE and on the PATCH of a cluster or a node pool, and ignored elsewhere; keys belong to the
organization. A retry with the same method, path and body (key order and spacing aside) gets the
first answer byte for byte, with `Idempotency-Replay: true`, for 24 hours, across restarts. The
same key with a different request is 409 `idempotency_key_reused`; while the first request is
still running, 409 `idempotency_key_in_progress`; if the first request died, the key is taken
over after its 60 s lease. A 5xx is never remembered: the retry runs anew.

### Concurrent edits

Every answer that is one cluster, node pool, node, Elastic IP, firewall rule or auth server
carries an `ETag`: a hash of that answer's bytes, so it changes exactly when what you would read
changes (a node elsewhere finishing does not change a pool's tag). Send it back:

- `If-Match: <etag>` on a change (PATCH or DELETE of a cluster, its exposure, a node pool, an
  Elastic IP, a firewall rule, an auth server) applies it only if the object is still as you
  read it; otherwise 412 `precondition_failed` and nothing changes: read again, decide again.
  The condition is checked on the object the change is decided on, in the same transaction as
  the write, so of several writers holding one tag exactly one succeeds. `*` matches whatever
  the object is now; a weak tag (`W/"…"`) or anything that is not an entity tag matches nothing.
  Without `If-Match`, changes work as always (last writer wins).
- `If-None-Match: <etag>` on a read of one object answers 304 with no body while it still has
  that tag.

An idempotent replay answers the stored first answer, its `ETag` included, whatever the object
is now.

### Rate limits

Each bearer token may make `RATE_LIMIT_PER_TOKEN` requests a minute (600 by default) and, of
those, `RATE_LIMIT_WRITES_PER_TOKEN` writes (120): a burst of that many at once, refilled
evenly over the minute. A token is counted as authentication reads it: `Bearer`, `bearer` and
extra spaces around it are one token and one quota. Every answer of the public routes says
where the token stands, in the IETF `RateLimit-Policy` and `RateLimit` fields
(draft-ietf-httpapi-ratelimit-headers):

```
ratelimit-policy: "token";q=600;w=60, "token-writes";q=120;w=60
ratelimit: "token";r=597;t=3, "token-writes";r=119;t=30
```

`q` requests per `w` seconds; `r` left now, `t` seconds until the quota is whole again. Over a
limit: 429 `rate_limited` with `Retry-After` (seconds), and the refused request counts for
nothing.

Requests that authenticate as no one (no `Authorization`, a malformed one, or a token the
account platform refused) count against their client address instead:
`RATE_LIMIT_UNAUTHENTICATED_PER_ADDRESS` a minute (120), stated as the `"address"` policy.
Once an address has spent it, its requests are answered 429 before the account platform is
asked, unless their token is one this process accepted in the last ten minutes, so a
working client behind the same NAT as someone guessing tokens keeps working. The client
address is the TCP peer; behind a load balancer or ingress, list it in `TRUSTED_PROXIES` and
the address it vouches for in `X-Forwarded-For` counts instead (nobody else's
`X-Forwarded-For` is believed). An IPv6 client counts by its /64. A token the platform refused
is also refused again without asking it for `TOKEN_REFUSAL_CACHE_TTL_S` (5 s). Measured in
`make bench`, item 5: 1,000 requests with one made-up token cost the platform one call; with a
new made-up token each, about the address's quota.

An organization may also make `RATE_LIMIT_WRITES_PER_ORGANIZATION` changes a minute (300),
whichever of its members make them and through whichever face (the API, the console). A write
counts once the caller is known to be allowed to make it, so a member's refused write, or
anyone outside the organization, spends nothing of it. Over it: the same 429 `rate_limited`
with `Retry-After`, its detail naming the organization's limit. A long-poll counts once, when it arrives, however long it is held. Health checks, the
metrics and the OpenAPI document are not limited.

Behind a load balancer, each process enforces its share of the limits (`RATE_LIMIT_REPLICAS`
processes: ⌈limit / replicas⌉ each, which its headers state), so a client spread evenly over
them gets the limit once, not once per process; a client stuck to one process gets its share.

### Audit trail

Every change that takes effect is recorded in the same transaction as the change itself, so
there is no change without its event and no event without its change: who made it (the user,
and the kind of client their token belongs to), through which face (`api` or `console`), what
(the object, a past-tense `action`, and the fields it set; an update of a pool shows each
moved field as `{"from": …, "to": …}`), when, the `X-Request-Id` of the request, and the
`outcome`: `applied` (done) or `accepted` (recorded, and provisioning carries it out: follow
the cluster's state). A refused request (403, 409, 412, 422, 429…) changes nothing and records
nothing. Secrets never appear: a credential shows its username or its token's hint, a changed
OIDC client secret shows as `"[redacted]"`. Reads of the trail are not recorded.

`GET /v1/public/audit-events` answers one organization's events (any member may read them),
newest first, `limit` (1-100, default 50) at a time, narrowed by `resource`, `resource_id`,
`cluster_id` (a cluster and everything under it), `actor` (a user id), `since` (inclusive) and
`until` (exclusive, RFC 3339). `next_cursor` is the `cursor` of the next page (null on the last),
with the same filters. Events are kept at least `AUDIT_RETENTION_DAYS` (400 by default; 0 keeps
them forever) and at most a month beyond: they are stored by month and a month goes once all of
it is older than that.

### Kubeconfig credentials

A kubeconfig carries the cluster's standing credential: the same on every download until it is
rotated. A download may instead ask for a credential of its own with `expiry_seconds` (at least
60, at most `KUBECONFIG_EXPIRY_MAX_SECONDS`, 30 days by default; the operator may also set
`KUBECONFIG_EXPIRY_DEFAULT_SECONDS` so every download gets one). Such a credential is recorded
(who downloaded it, when, until when; never its token), its user entry in the file is named
after it, and the file says when it expires (a comment, and the user's `extensions`, which
`kubectl config view` shows). The cluster's API server asks the control plane about every
token it is shown, so a credential stops working the moment it expires or is revoked.
`GET /v1/public/clusters/{id}/credentials` lists them (any member; never a token);
`DELETE …/credentials/{credential}` revokes one (its holder, or a super_admin);
`DELETE …/credentials` rotates: every credential is revoked and the standing one replaced, so
every kubeconfig downloaded before stops working (super_admin). Each is in the audit trail.

### Operations

A change that hands work to provisioning (a create, a pool added, resized, relabelled or
deleted, a node replaced, an exposure or control-plane firewall change, an Elastic IP allocated
or released, a firewall rule created or deleted, a deletion) starts an operation, and its
answer points at it: `Operation-Location`
on the 201 or 202, and `Location` on a 202. `GET /v1/public/clusters/{id}/operations/{operation}`
says what it is (`kind`, the object as `resource` and `resource_id`), who asked
(`requested_by`, `request_id`), and how it goes: `running` until provisioning has carried it
out, then `succeeded`, `failed` (with `last_error`: the object's own failure reason) or
`cancelled` (the cluster was deleted first). While it runs, `attempts` counts the failed tries
of the work and `last_error` says the last one in words to act on; failed work is retried by
itself. An upgrade's operation also says its last step in `progress` (the control plane, then
each pool's nodes replaced one by one). `GET /v1/public/clusters/{id}/operations` lists them newest first (`status` filters,
`page`/`size` as every list). Operations stay readable after their cluster is deleted, so a
client sees its deletion succeed, and are kept as long as the audit trail. A change that only
records something (a description, an auth server) has no operation: it is done when answered.

### Upgrades and maintenance

A cluster's `version` is its control plane's. `GET /v1/public/clusters/{id}/upgrades` (any
member) lists the versions it may move to: newer ones only, at most one minor version ahead
(Kubernetes' own skew policy), oldest first. `POST /v1/public/clusters/{id}/upgrade`
`{"version": …}` (super_admin; `Idempotency-Key` and `If-Match` honoured) answers 202 with the
cluster, its `upgrade` `{from, to, automatic}` set, and the operation that follows it. The
control plane moves first; then each node pool in turn goes `Upgrading` (its `version` is the
one its nodes move to) and replaces its nodes one at a time: a new node of the new version is
`Ready` before an old one is drained and removed. A pool's `max_surge` (1-10, default 1) is how
many nodes above its count it may go meanwhile, `max_unavailable` (0-10, default 0) how many
below; both are set on the pool (create or PATCH) or for every pool by the upgrade's body. With
the defaults a pool never has fewer `Ready` nodes than its count. Every node lists its own
`version`; the state long-poll wakes on each step. A failed node creation is retried by itself
(the old nodes keep serving); the operation's `last_error` says what failed in words to act on.
Refused: a version not offered (400 `unknown_version`), the current one, an older one or one
that skips a minor version (400 `upgrade_not_allowed`, naming the version to go to first), a
cluster not `Provisioned` (409 `cluster_not_provisioned`), one with an upgrade, an exposure
change or a pool's change still in flight (409 `change_in_flight`), a member (403). While a pool
is `Upgrading` its size cannot change (409 `invalid_state`).

`maintenance_window` (`day`: `any` or a weekday; `start_time`: `HH:MM` UTC; four hours long;
any day at 00:00 unless set) and `auto_upgrade` (default false) are set on create and by
`PATCH /v1/public/clusters/{id}`. With `auto_upgrade`, the newest patch of the cluster's minor
version is applied inside the window, at most once a window, as the same upgrade (its operation
and audit event name `maintenance-policy` as who asked, and `upgrade.automatic` is true). The
upgrades answer shows `next_maintenance_window_start`: the window open now, else the next one.
Unlike DigitalOcean and GKE, an automatic upgrade never moves to a new minor version (that is
always a person's decision here), and surge nodes do not count against the zone's capacity.

### Registration reasons

A cluster's `hub_registration` and `default_environment` carry a `reason` only when not ready,
one of: `organization quota exceeded`, `name or address conflict in the service hub`,
`registration rejected by the service hub`, `waiting for the service platform installation`,
`Door platform installation failed`.

### Node-pool labels and taints

A pool's `labels` and `taints` are put on each of its nodes, as Kubernetes labels and taints.
A label's key, and a taint's, is a Kubernetes qualified name: an optional prefix (a DNS
subdomain of at most 253 characters: lowercase labels joined by dots) and `/`, then a name of
1-63 letters, digits, `-`, `_` and `.` that starts and ends with a letter or digit
(`dedicated`, `nvidia.com/gpu`). A value is empty or 1-63 of the same characters. A taint is
`{key, value, effect}`, `value` empty when omitted, `effect` one of `NoSchedule` (pods that do
not tolerate it are not scheduled there), `PreferNoSchedule` (avoided when possible) and
`NoExecute` (also evicted when running). A pool has at most 50 taints and one per key and
effect (the same key with two effects is two taints, as on a node). Each broken rule is a 422
naming its field: `node_pools[0].taints[1].key` in a create, `taints[1].key` for a pool,
`labels.<key>` for a label (a key too long or unprintable to repeat is named `labels`).

A PATCH of a pool's `labels` or `taints` replaces them whole (`[]` or `{}` removes them) and is
carried out in place: each running node of the pool gets them, none is replaced or drained
(202 with an operation, which succeeds once every node carries them). `GET …/nodes` shows what
each node carries now: until the change reached it, a node's differ from its pool's. A node
created later (a scale-up, a replacement) comes up with the pool's labels and taints.

Where this differs: DigitalOcean and GKE also apply a pool's label and taint changes to its
existing nodes without recreating them. Kubernetes reserves the `kubernetes.io/` and `k8s.io/`
prefixes (a node may not set most of them on itself); this service does not refuse them yet.
A pool's `tags` are the provider's own, as DigitalOcean's are, and are not put on nodes.

### Control-plane firewall

`control_plane_firewall` says who may call a cluster's API server: `{"enabled": false,
"allowed_addresses": []}` by default, anyone holding a credential; enabled, only callers from
one of `allowed_addresses`, any other refused with 403 (a Kubernetes `Status` of reason
`Forbidden`) whatever credential it holds, which is not even looked at. The list holds IPv4
and IPv6 networks in CIDR notation, at most 100, none twice:

- the prefix length is required (`/32` or `/128` for one address);
- host bits must be zero: `10.1.2.3/8` is refused with the network meant (`10.0.0.0/8`), not
  silently widened, so the list says exactly what it admits;
- an IPv4 network written as IPv6 (`::ffff:10.0.0.0/104`) and octets with leading zeros
  (`010.0.0.0/8`) are refused, so each network has one spelling; IPv6 is shown lowercase and
  compressed (`2001:DB8:0::/32` reads back as `2001:db8::/32`);
- `0.0.0.0/0` and `::/0` are accepted (every IPv4, or every IPv6, caller);
- an IPv4 caller that reaches the server as IPv6 (`::ffff:203.0.113.7`) is matched as the IPv4
  address it is;
- enabled with no network is refused (422 on `control_plane_firewall.allowed_addresses`): it
  would refuse every client, the service's own tools too. Disabling is how to open it; the list
  is kept while disabled.

It is set on create (optional) and changed by `PATCH /v1/public/clusters/{id}` with
`control_plane_firewall` (super_admin, `If-Match` as every PATCH). In a PATCH an absent field
keeps its value: `{"control_plane_firewall": {"enabled": false}}` opens the control plane and
keeps the list. A change is carried out by provisioning: 202 with its operation, the cluster's
`control_plane_firewall_change` shows the firewall being applied while
`control_plane_firewall` still shows (and the API server still enforces) the one before. It
needs the cluster `Provisioned` (400 `phase_not_provisioned` before) and no other firewall
change in flight (409 `change_in_flight`). A PATCH that asks for the firewall the cluster
already has starts nothing (200). Each change is in the audit trail as
`control_plane_firewall_change_started` with `{"from": …, "to": …}`.

Where this differs: GKE's authorized networks take up to 50 IPv4 networks (100 with a private
endpoint); DigitalOcean's control-plane firewall takes a list of addresses and networks. This
service takes IPv4 and IPv6, at most 100, refuses a network with host bits set rather than
widen it, and refuses an enabled empty list rather than lock every client out.
HEAD
} >"$OUT"

# run TITLE CURL-ARGS...: runs curl, records the command and the answer (status line, a few
# headers, the body pretty-printed and cut to 40 lines).
run() {
    local title=$1
    shift
    local shown="curl"
    local arg
    for arg in "$@"; do
        arg=${arg//$ADMIN/\$ADMIN}
        arg=${arg//$MEMBER/\$MEMBER}
        arg=${arg//$BASE/\$BASE}
        if [[ $arg == *" "* || $arg == *"{"* || $arg == *"?"* || $arg == *"&"* ]]; then shown+=" '$arg'"; else shown+=" $arg"; fi
    done
    local raw
    raw=$(curl -sS -i "$@")
    local head body
    head=$(printf '%s' "$raw" | sed -n '1,/^\r$/p' | tr -d '\r' | grep -iE '^(HTTP/|location|operation-location|retry-after|idempotency-replay|content-type|www-authenticate|allow|etag|ratelimit-policy|ratelimit)' || true)
    body=$(printf '%s' "$raw" | sed '1,/^\r$/d')
    {
        printf '\n### %s\n\n```sh\n%s\n```\n\n```\n%s\n\n' "$title" "$shown" "$head"
        local pretty
        pretty=$(printf '%s' "$body" | python3 -m json.tool 2>/dev/null) || pretty=$body
        # sed reads all its input, so no writer dies of SIGPIPE under pipefail.
        printf '%s\n' "$pretty" | sed -n '1,40p'
        if [[ $(printf '%s\n' "$pretty" | wc -l) -gt 40 ]]; then printf '(cut)\n'; fi
        printf '```\n'
    } >>"$OUT"
    LAST_BODY=$body
    LAST_HEAD=$head
}

# The ETag of the last answer.
last_etag() { printf '%s\n' "$LAST_HEAD" | sed -n 's/^[Ee][Tt][Aa][Gg]: //p'; }

field() { printf '%s' "$LAST_BODY" | python3 -c "import sys,json; print(json.load(sys.stdin)$1)"; }

wait_phase() {
    local id=$1 phase=$2 i
    for i in $(seq 1 120); do
        [[ $(curl -s -H "Authorization: Bearer $ADMIN" "$BASE/v1/public/clusters/$id" | python3 -c 'import sys,json; print(json.load(sys.stdin)["phase"])') == "$phase" ]] && return 0
        sleep 0.5
    done
    echo "cluster $id never reached $phase" >&2
    return 1
}

# Waits until nothing is in flight on the cluster: every pool Ready, no exposure change, no
# upgrade.
wait_settled() {
    local id=$1 i
    for i in $(seq 1 240); do
        curl -s -H "Authorization: Bearer $ADMIN" "$BASE/v1/public/clusters/$id" | python3 -c '
import sys, json
c = json.load(sys.stdin)
busy = c["exposure_change"] or c["upgrade"] or any(p["status"] != "Ready" for p in c["node_pools"])
sys.exit(1 if busy else 0)' && return 0
        sleep 0.5
    done
    echo "cluster $id never settled" >&2
    return 1
}

J=(-H 'Content-Type: application/json')
A=(-H "Authorization: Bearer $ADMIN")
M=(-H "Authorization: Bearer $MEMBER")

echo -e "\n## System (no authentication)" >>"$OUT"
run "GET /healthz" "$BASE/healthz"
run "GET /readyz" "$BASE/readyz"
run "GET /v1/openapi.json (cut)" "$BASE/v1/openapi.json" -o /dev/null -w '%{http_code} %{content_type} %{size_download} bytes\n'

echo -e "\n## Catalog" >>"$OUT"
run "GET /v1/catalog" "${M[@]}" "$BASE/v1/catalog?organization=acme&zone=zone-1"

echo -e "\n## Clusters" >>"$OUT"
run "POST /v1/public/clusters (201; the organization comes from the body)" "${A[@]}" "${J[@]}" -H "Idempotency-Key: create-demo-$SUFFIX" -X POST "$BASE/v1/public/clusters" \
    -d "{\"organization\":\"acme\",\"name\":\"demo-$SUFFIX\",\"description\":\"example\",\"tags\":[\"team-a\"],\"node_pools\":[{\"name\":\"default\",\"size\":\"kube.c5.xlarge\",\"count\":2}]}"
ID=$(field '["id"]')
run "The same request again: the stored answer, with Idempotency-Replay: true" "${A[@]}" "${J[@]}" -H "Idempotency-Key: create-demo-$SUFFIX" -X POST "$BASE/v1/public/clusters" \
    -d "{\"organization\":\"acme\",\"name\":\"demo-$SUFFIX\",\"description\":\"example\",\"tags\":[\"team-a\"],\"node_pools\":[{\"name\":\"default\",\"size\":\"kube.c5.xlarge\",\"count\":2}]}"
run "GET /v1/public/clusters (the X-Platform-Organization header names the organization)" "${M[@]}" -H "X-Platform-Organization: acme" "$BASE/v1/public/clusters?size=2&page=1"
run "GET /v1/public/clusters/{id}/state (long-poll: answers at once when version > since)" "${M[@]}" "$BASE/v1/public/clusters/$ID/state?since=0&timeout_seconds=5"
run "GET /v1/public/clusters/{id}/kubeconfig before the control plane is up: 202" "${M[@]}" "$BASE/v1/public/clusters/$ID/kubeconfig"
wait_phase "$ID" Provisioned
run "GET /v1/public/clusters/{id}" "${M[@]}" "$BASE/v1/public/clusters/$ID"
SEEN=$(last_etag)
run "GET /v1/public/clusters/{id} with If-None-Match: 304 while unchanged" "${M[@]}" -H "If-None-Match: $SEEN" "$BASE/v1/public/clusters/$ID"
run "PATCH /v1/public/clusters/{id} (description and tags: 200)" "${A[@]}" "${J[@]}" -X PATCH "$BASE/v1/public/clusters/$ID" -d '{"description":"changed","tags":["team-a","prod"]}'
run "PATCH with the If-Match of the version read before that change: 412, nothing changed" "${A[@]}" "${J[@]}" -H "If-Match: $SEEN" -X PATCH "$BASE/v1/public/clusters/$ID" -d '{"description":"overwritten?"}'
run "PATCH /v1/public/clusters/{id} with control_plane_firewall (202; enforced once applied)" "${A[@]}" "${J[@]}" -X PATCH "$BASE/v1/public/clusters/$ID" -d '{"control_plane_firewall":{"enabled":true,"allowed_addresses":["203.0.113.0/24","2001:db8::/32"]}}'
run "A second firewall change while one is in flight: 409" "${A[@]}" "${J[@]}" -X PATCH "$BASE/v1/public/clusters/$ID" -d '{"control_plane_firewall":{"enabled":false}}'
run "A network with host bits set: 422" "${A[@]}" "${J[@]}" -X PATCH "$BASE/v1/public/clusters/$ID" -d '{"control_plane_firewall":{"allowed_addresses":["10.1.2.3/8"]}}'
run "GET /v1/public/clusters/{id}/kubeconfig (YAML)" "${M[@]}" "$BASE/v1/public/clusters/$ID/kubeconfig"
run "GET /v1/public/clusters/{id}/kubeconfig?format=json" "${M[@]}" "$BASE/v1/public/clusters/$ID/kubeconfig?format=json" -o /dev/null -w '%{http_code} %{content_type}\n'

echo -e "\n## Node pools and nodes" >>"$OUT"
run "GET /v1/public/clusters/{id}/node-pools" "${M[@]}" "$BASE/v1/public/clusters/$ID/node-pools"
run "POST /v1/public/clusters/{id}/node-pools (202)" "${A[@]}" "${J[@]}" -X POST "$BASE/v1/public/clusters/$ID/node-pools" -d '{"name":"batch","size":"kube.m5.large","count":1,"labels":{"workload":"batch"},"taints":[{"key":"dedicated","value":"batch","effect":"NoSchedule"}]}'
run "A taint with an unknown effect, and the same key and effect twice: 422" "${A[@]}" "${J[@]}" -X PATCH "$BASE/v1/public/clusters/$ID/node-pools/batch" -d '{"taints":[{"key":"dedicated","effect":"NoSchedul"},{"key":"gpu","effect":"NoExecute"},{"key":"gpu","value":"a100","effect":"NoExecute"}]}'
run "PATCH /v1/public/clusters/{id}/node-pools/{pool} (202; Location: the operation that follows it)" "${A[@]}" "${J[@]}" -X PATCH "$BASE/v1/public/clusters/$ID/node-pools/default" -d '{"auto_scale":true,"min_nodes":1,"max_nodes":5,"count":3}'
OPERATION=$(printf '%s\n' "$LAST_HEAD" | sed -n 's/^[Oo]peration-[Ll]ocation: //p')
run "GET /v1/public/clusters/{id}/operations/{operation} (right after the change)" "${M[@]}" "$BASE$OPERATION"
sleep 3
run "GET /v1/public/clusters/{id}/operations (newest first)" "${M[@]}" "$BASE/v1/public/clusters/$ID/operations?size=2"
run "GET /v1/public/clusters/{id}/nodes" "${M[@]}" "$BASE/v1/public/clusters/$ID/nodes"
NODE=$(field '["items"][0]["name"]')
run "PATCH /v1/public/clusters/{id}/node-pools/{pool} with taints (202; the same nodes get them)" "${A[@]}" "${J[@]}" -X PATCH "$BASE/v1/public/clusters/$ID/node-pools/batch" -d '{"taints":[{"key":"dedicated","value":"batch","effect":"NoExecute"}],"labels":{"workload":"batch","tier":"spot"}}'
sleep 2
run "GET /v1/public/clusters/{id}/node-pools/{pool}/nodes" "${M[@]}" "$BASE/v1/public/clusters/$ID/node-pools/batch/nodes"
run "DELETE /v1/public/clusters/{id}/nodes/{node} (202; the node is replaced)" "${A[@]}" -X DELETE "$BASE/v1/public/clusters/$ID/nodes/$NODE"
run "DELETE /v1/public/clusters/{id}/node-pools/{pool} (202)" "${A[@]}" -X DELETE "$BASE/v1/public/clusters/$ID/node-pools/batch"

echo -e "\n## Elastic IPs and firewall rules" >>"$OUT"
run "POST /v1/public/clusters/{id}/elastic-ips (202; intranet clusters take private ones)" "${A[@]}" "${J[@]}" -X POST "$BASE/v1/public/clusters/$ID/elastic-ips" -d '{"name":"web","exposure":"private"}'
EIP=$(field '["id"]')
sleep 3
run "GET /v1/public/clusters/{id}/elastic-ips" "${M[@]}" "$BASE/v1/public/clusters/$ID/elastic-ips"
run "GET /v1/public/clusters/{id}/elastic-ips/{eip}" "${M[@]}" "$BASE/v1/public/clusters/$ID/elastic-ips/$EIP"
run "DELETE /v1/public/clusters/{id}/elastic-ips/{eip} (202; only from Ready or Failed)" "${A[@]}" -X DELETE "$BASE/v1/public/clusters/$ID/elastic-ips/$EIP"
run "POST /v1/public/clusters/{id}/firewall-rules (202; the cluster must be Provisioned)" "${A[@]}" "${J[@]}" -X POST "$BASE/v1/public/clusters/$ID/firewall-rules" \
    -d '{"name":"https","description":"web","direction":"ingress","protocol":"tcp","source_cidrs":["203.0.113.0/24"],"port_range":{"from":443,"to":443}}'
RULE=$(field '["id"]')
run "GET /v1/public/clusters/{id}/firewall-rules" "${M[@]}" "$BASE/v1/public/clusters/$ID/firewall-rules"
run "GET /v1/public/clusters/{id}/firewall-rules/{rule}" "${M[@]}" "$BASE/v1/public/clusters/$ID/firewall-rules/$RULE"
run "DELETE /v1/public/clusters/{id}/firewall-rules/{rule} (202)" "${A[@]}" -X DELETE "$BASE/v1/public/clusters/$ID/firewall-rules/$RULE"

echo -e "\n## Upgrades and maintenance" >>"$OUT"
wait_settled "$ID"
run "GET /v1/public/clusters/{id}/upgrades (newer versions, at most one minor ahead)" "${M[@]}" "$BASE/v1/public/clusters/$ID/upgrades"
run "POST /v1/public/clusters/{id}/upgrade (202; the control plane first, then each pool node by node)" "${A[@]}" "${J[@]}" -H "Idempotency-Key: upgrade-demo-$SUFFIX" -X POST "$BASE/v1/public/clusters/$ID/upgrade" -d '{"version":"v1.32.6"}'
wait_settled "$ID"
run "GET /v1/public/clusters/{id}/nodes (every node replaced by one of the new version)" "${M[@]}" "$BASE/v1/public/clusters/$ID/nodes"
run "POST /v1/public/clusters/{id}/upgrade to an older version: 400" "${A[@]}" "${J[@]}" -X POST "$BASE/v1/public/clusters/$ID/upgrade" -d '{"version":"v1.31.9"}'
run "PATCH /v1/public/clusters/{id} (the maintenance window and automatic patch upgrades)" "${A[@]}" "${J[@]}" -X PATCH "$BASE/v1/public/clusters/$ID" -d '{"maintenance_window":{"day":"saturday","start_time":"03:00"},"auto_upgrade":true}'

echo -e "\n## Exposure" >>"$OUT"
run "PATCH /v1/public/clusters/{id}/exposure (202; the kubeconfig must be downloaded again after)" "${A[@]}" "${J[@]}" -X PATCH "$BASE/v1/public/clusters/$ID/exposure" -d '{"exposure":"private"}'

echo -e "\n## Kubeconfig credentials" >>"$OUT"
run "GET /v1/public/clusters/{id}/kubeconfig?expiry_seconds=3600&format=json (a credential of its own)" "${M[@]}" "$BASE/v1/public/clusters/$ID/kubeconfig?expiry_seconds=3600&format=json"
CRED_OWN=$(field '["credential"]["id"]')
run "GET /v1/public/clusters/{id}/credentials" "${M[@]}" "$BASE/v1/public/clusters/$ID/credentials"
run "DELETE /v1/public/clusters/{id}/credentials/{credential} (its holder, or a super_admin)" "${M[@]}" -X DELETE "$BASE/v1/public/clusters/$ID/credentials/$CRED_OWN"
run "DELETE /v1/public/clusters/{id}/credentials (rotate: every kubeconfig downloaded before stops working)" "${A[@]}" -X DELETE "$BASE/v1/public/clusters/$ID/credentials"

echo -e "\n## Gateway auth servers" >>"$OUT"
echo -e "\nA Basic user's password is at least 12 characters, not the username, not one character repeated\nand not a commonly used password; it is stored only as an Argon2id hash. A refusal is a 422 on\n\`config.credentials[i].password\` (or \`password\` when a user is added)." >>"$OUT"
run "POST /v1/public/gateway/auth-servers (201; secrets are write-only)" "${A[@]}" "${J[@]}" -X POST "$BASE/v1/public/gateway/auth-servers" \
    -d "{\"organization\":\"acme\",\"name\":\"partners-$SUFFIX\",\"environment\":\"production\",\"type\":\"basic\",\"config\":{\"realm\":\"Partners\",\"credentials\":[{\"username\":\"alice\",\"password\":\"correct horse battery staple\"}]}}"
AS=$(field '["id"]')
run "GET /v1/public/gateway/auth-servers?environment=production" "${M[@]}" "$BASE/v1/public/gateway/auth-servers?organization=acme&environment=production"
run "GET /v1/public/gateway/auth-servers/{id}" "${M[@]}" "$BASE/v1/public/gateway/auth-servers/$AS"
run "PATCH /v1/public/gateway/auth-servers/{id}" "${A[@]}" "${J[@]}" -X PATCH "$BASE/v1/public/gateway/auth-servers/$AS" -d '{"config":{"realm":"Partner area"}}'
run "POST /v1/public/gateway/auth-servers/{id}/credentials (201)" "${A[@]}" "${J[@]}" -X POST "$BASE/v1/public/gateway/auth-servers/$AS/credentials" -d '{"username":"bob","password":"another long password"}'
CRED=$(field '["id"]')
run "DELETE /v1/public/gateway/auth-servers/{id}/credentials/{credential_id} (204)" "${A[@]}" -X DELETE "$BASE/v1/public/gateway/auth-servers/$AS/credentials/$CRED"
run "DELETE /v1/public/gateway/auth-servers/{id} (204)" "${A[@]}" -X DELETE "$BASE/v1/public/gateway/auth-servers/$AS"

echo -e "\n## Deleting a cluster, and a few errors" >>"$OUT"
run "DELETE /v1/public/clusters/{id} (202, then gone: 404)" "${A[@]}" -X DELETE "$BASE/v1/public/clusters/$ID"
run "A member cannot write: 403" "${M[@]}" -X DELETE "$BASE/v1/public/clusters/$ID"
run "No token: 401" "$BASE/v1/public/clusters"
run "An unknown field: 422 with the field's path" "${A[@]}" "${J[@]}" -X POST "$BASE/v1/public/clusters" -d '{"organization":"acme","name":"x","node_pools":[{"size":"kube.c5.large","count":0}],"control_plane_option_id":"cp-ha"}'

echo -e "\n## Audit trail" >>"$OUT"
run "GET /v1/public/audit-events?cluster_id={id}&limit=3 (newest first; a member may read)" "${M[@]}" "$BASE/v1/public/audit-events?organization=acme&cluster_id=$ID&limit=3"
run "GET /v1/public/audit-events?resource=credential (the credentials of the auth server above)" "${M[@]}" "$BASE/v1/public/audit-events?organization=acme&resource=credential&limit=2"
# Fair use: another token's writes until the limit (a project_admin may not write, but every
# write counts), then the refusal.
P=(-H "Authorization: Bearer dev-only-token-acme-project-admin-5a9c7e3b1d2f4a6c8e0b")
for _ in $(seq 1 200); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "${P[@]}" -X DELETE "$BASE/v1/public/clusters/$ID") == 429 ]] && break
done
run "Over a token's write limit: 429 with Retry-After (the writes just before were refused with 403 and counted)" "${P[@]}" -X DELETE "$BASE/v1/public/clusters/$ID"
echo "wrote $OUT" >&2
# The kubeconfig's bearer token is a real credential of the example cluster: keep it off the page.
sed -i 's/^\(    token: \)".*"$/\1"<the cluster'"'"'s bearer token>"/' "$OUT"
# The same for a credential of a download's own, shown inside the JSON kubeconfig.
sed -i 's/kc-[0-9a-f]\{64\}/<the credential'"'"'s bearer token>/g' "$OUT"
