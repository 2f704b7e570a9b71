"""Seeded synthetic meeting talk for the benchmarks: no network, no downloaded data.

``Talk(seed)`` fills ~200 sentence templates with names, services, numbers and dates
(plus openers and tails, so a few thousand sentence shapes); ``meeting`` strings them
into a timed conversation, written as WebVTT or as ``[hh:mm:ss] Speaker: text``. The
same seed always gives the same text, so corpora can be cached by their parameters.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import date, timedelta

GENERATOR_VERSION = 1  # bump when the text changes, so cached corpora are rebuilt

FIRST = (
    "Priya Marcus Sofia Dana John Aisha Tomas Mei Oliver Fatima Lucas Hannah Ravi Elena "
    "Kwame Ingrid Diego Yuki Samir Chloe Noah Amara Felix Leila Mateo Greta Omar Zoe Arjun "
    "Nadia Ethan Beatriz Kenji Maya Ivan Laura Tariq Sara Jonas Camille"
).split()
LAST = (
    "Raman Lee Alvarez Kim Park Okafor Novak Chen Brennan Haddad Silva Weber Iyer Petrova "
    "Mensah Larsen Torres Tanaka Aziz Martin Cohen Eze Fischer Karimi Rossi Berg Farouk "
    "Nguyen Patel Sokolova Walsh Costa Ito Shah Volkov Moreau Malik Lindqvist Dubois Reyes"
).split()
SERVICES = (
    "auth service|billing service|search API|session service|notification pipeline|"
    "ingest worker|payments gateway|GraphQL layer|mobile backend|export job|admin console|"
    "feature-flag service|analytics warehouse|image resizer|email sender|rate limiter|"
    "audit log|webhook dispatcher|checkout flow|onboarding wizard"
).split("|")
TERMS = (
    "Cognito|Keycloak|Kafka|Postgres|Redis|Terraform|Kubernetes|Helm chart|SAML|OAuth|"
    "refresh tokens|connection pool|read replica|blue-green deploy|canary|circuit breaker|"
    "dead-letter queue|schema migration|vector index|CDN cache|SSO|MFA|JWT signing keys|"
    "load balancer|autoscaler|cron job|feature flag|retry policy|backfill|sharding|"
    "p99 latency|error budget|on-call rotation|runbook|postmortem|staging cluster|S3 bucket|"
    "Lambda|DynamoDB|Elasticsearch|Weaviate|gRPC|protobuf|OpenTelemetry|Grafana|PagerDuty|"
    "Sentry|Datadog|GitHub Actions|Dependabot|SBOM|TLS certificates|secrets manager|IAM roles|"
    "VPC peering|DNS failover|rate limits|websocket|service mesh|Envoy|Istio|Argo CD"
).split("|")
TEAMS = (
    "platform|identity|payments|growth|mobile|data|infra|security|support|design|SRE|"
    "search|frontend|QA"
).split("|")
METRICS = (
    "login success|error rate|p95 latency|queue depth|CPU usage|memory|churn|conversion|"
    "signup rate|cache hit ratio|build time|test flakiness|page load time|ticket volume|"
    "refresh success|cold start time"
).split("|")
CUSTOMERS = (
    "Northwind|Hallberg|Acme|Globex|Initech|Umbrella Health|Stark Logistics|Wayne Retail|"
    "Tyrell Labs|Soylent Foods|Vandelay Imports|Pied Piper|Hooli|Massive Dynamic"
).split("|")
REGIONS = "us-east-1|eu-west-1|eu-central-1|ap-southeast-2|us-west-2".split("|")
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday".split()
MONTHS = (
    "January February March April May June July August September October November December"
).split()

TEMPLATES = (
    # status and planning
    "I finished the {term} spike for the {service} yesterday.",
    "The {service} is blocked on the {term} work from the {team} team.",
    "We should ship the {term} change before {day}.",
    "My plan is to have a draft of the {term} design doc by {day}.",
    "Can we move the {service} review to {day} afternoon?",
    "I'd like {first} to own the {term} migration.",
    "Let's timebox the {term} investigation to {small} days.",
    "The {team} team agreed to take the {service} on-call from {month}.",
    "We're about {pct} percent done with the {term} rollout.",
    "I think the {term} estimate was off by about {small} weeks.",
    "Ticket {ticket} is still open because nobody owns the {service}.",
    "Let's put {ticket} in the next sprint and drop the {term} cleanup.",
    "The roadmap for {month} has the {service} rewrite at the top.",
    "We have {small} engineers on the {term} project until {month}.",
    "I'll write up the decision about {term} in the channel after this.",
    "The {service} milestone slipped to the second week of {month}.",
    "If we cut scope on {term}, we can still make the {month} release.",
    "We said {version} would include the {term} fix, and it doesn't yet.",
    "{name} will pair with {first} on the {service} this week.",
    "Do we have an owner for {ticket}, or is it still floating?",
    "The sprint goal is to get the {service} onto {term}.",
    "I'd rather finish {term} than start the {term2} work in parallel.",
    "Quick update: the {term} pull request is in review.",
    "The {service} backlog is down to {num} tickets.",
    "We closed {num} tickets last sprint, mostly {term} bugs.",
    # incidents and reliability
    "At {clock} UTC the {metric} alarm fired for the {service}.",
    "The outage lasted about {small} minutes and hit {region} only.",
    "Root cause was a misconfigured {term} on the {service}.",
    "We rolled back {version} and the {metric} recovered within {small} minutes.",
    "About {num} users were logged out during the incident.",
    "The {term} retries made the outage worse, not better.",
    "Our rule is to roll back if {metric} stays under {pct} percent for ten minutes.",
    "I paged {first} at {clock} because the {service} was returning errors.",
    "The {service} hit its {term} limit during the traffic spike.",
    "We need a runbook entry for when {term} falls over at night.",
    "The postmortem for {ticket} is due on {day}.",
    "Nothing in the {service} logs explained the spike in {metric}.",
    "The alert on {metric} was too noisy, so people started ignoring it.",
    "We burned {pct} percent of the error budget on that one incident.",
    "Support got about {num} tickets that morning, mostly from {region}.",
    "The {term} failover worked, but DNS took {small} minutes to catch up.",
    "We found the bug by diffing the {term} config between staging and prod.",
    "I want a synthetic check on the {service} so we hear about this before customers do.",
    "The {service} leaked connections until the {term} ran out.",
    "That incident was the second one this quarter involving {term}.",
    "Let's add a dashboard for {metric} next to the {service} graphs.",
    "The fix was a one-line change to the {term} timeout.",
    "Blameless, as always: we're here to fix the system, not find a culprit.",
    "We should practise the {term} failover in a game day before {month}.",
    # numbers and performance
    "The {service} p99 is around {ms} milliseconds after the change.",
    "We measured {metric} at {pct} percent on the new build.",
    "The benchmark shows {term} is about {small} times faster for our workload.",
    "Memory on the {service} grew to {num} megabytes under load.",
    "With the {term} we'd save roughly {money} a month.",
    "The renewal jumps from {money} to {money2} a month.",
    "Our {term} bill in {region} doubled since {month}.",
    "Cold starts on the {service} are still {ms} milliseconds.",
    "Build time went from {small} minutes to under a minute with the {term} cache.",
    "We handle about {num} requests a second at peak on the {service}.",
    "The {term} index is {num} megabytes, which fits in memory easily.",
    "At {num} monthly active users the pricing gets painful.",
    "Latency is fine until about {num} concurrent sessions, then it falls off a cliff.",
    "The load test on {term} topped out at {num} requests per second.",
    "Conversion went up {small} percent after the {service} redesign.",
    "Churn in {region} is {pct} percent higher than last quarter.",
    "We're paying for {num} seats of {term} and using maybe half.",
    "A {ms} millisecond budget for search leaves room for the model call.",
    "If the {metric} stays above {pct} percent for a week, we call it done.",
    "The {service} queue peaked at {num} messages during the backfill.",
    # auth and security
    "The SAML customers can't move until {customer} updates their metadata.",
    "{customer} wants SSO enforced for every account by {month}.",
    "We're rotating the {term} every {small} days from now on.",
    "Refresh tokens from the old provider won't work after the cut-over.",
    "The session service should accept both token formats for {small} weeks.",
    "MFA enrollment is at {pct} percent for admins and much lower for everyone else.",
    "Security wants the {term} audit finished before the {month} review.",
    "The pen test found {small} issues, none of them critical.",
    "We should never log the raw {term}, only a hash.",
    "{customer} asked whether we store passwords, and we don't.",
    "The login page needs a clearer message when {term} is down.",
    "Let's keep the {term} keys in the secrets manager, not in the repo.",
    "The migration Lambda moves users on their first successful login.",
    "Password resets spiked to {num} after the cut-over.",
    "I'm not comfortable with {term} holding admin scopes.",
    "Who approves changes to the {term} policy now that {first} moved teams?",
    "We need an allowlist for the {service} callback URLs.",
    "The {term} certificate expires on the {nth} of {month}.",
    # data and infrastructure
    "The {term} migration needs a maintenance window of about {small} hours.",
    "We can backfill the {service} data from the {term} snapshots.",
    "The read replica in {region} lags by {small} seconds under load.",
    "I'd move the {service} to {term} and retire the old cluster.",
    "The Terraform plan touches {num} resources, so let's review it slowly.",
    "We lost a node in {region} and the {term} rebalanced on its own.",
    "Storage for the {service} grows about {num} gigabytes a month.",
    "The {term} upgrade to {version} needs a schema change first.",
    "Can we pin the {term} version until after the {month} release?",
    "The nightly {term} job overlaps with the {service} backups.",
    "Indexing {num} documents took {small} hours on the old hardware.",
    "We should shard the {service} by tenant before it gets bigger.",
    "The staging cluster is out of sync with prod again.",
    "Helm values for the {service} differ between {region} and {region2}.",
    "Autoscaling kicked in at {clock} and added {small} nodes.",
    "The {term} dashboards in Grafana are out of date.",
    "The {service} writes to {term} and nobody reads it anymore.",
    "We could drop the {term} entirely if the {service} handled retries.",
    "I'd like a dry run of the {term} migration against a prod snapshot.",
    "Disk on the {term} hosts hit {pct} percent last night.",
    # product, customers, support
    "{customer} reported that the {service} was slow on {day}.",
    "The biggest complaint from {customer} is the {service} onboarding.",
    "Sales promised {customer} the {term} integration by {month}.",
    "{customer} is evaluating us against two competitors this quarter.",
    "Support wants a macro for questions about the {service}.",
    "The {service} redesign tested well with {small} of the {num} users we asked.",
    "We keep getting tickets about {term} from {region} customers.",
    "{customer} renewed for another year, with {term} as the condition.",
    "The release notes for {version} should mention the {service} change.",
    "Customers in {region} see the new {service} first, then everyone else.",
    "I'd hold the {term} feature until {customer} has tried it in staging.",
    "The {service} is our most requested feature on the feedback board.",
    "We're sunsetting the old {service} at the end of {month}.",
    "Design wants another pass at the {service} empty state.",
    "The {term} toggle confused people in the usability study.",
    "{customer}'s admin asked for an export of their {service} data.",
    "Let's send {customer} a summary of the incident by {day}.",
    "The {service} help article still describes the old flow.",
    # testing and quality
    "The {service} tests are flaky because they depend on {term}.",
    "We should run the {term} tests against a real server, not a mock.",
    "Coverage on the {service} dropped to {pct} percent.",
    "The end-to-end suite takes {small} minutes, which is too slow.",
    "I added a regression test for {ticket}.",
    "QA found {small} blockers in the {version} release candidate.",
    "Let's not merge the {term} change without a test for the failure path.",
    "The contract tests between the {service} and {term} caught it.",
    "CI has been red since the {term} bump this morning.",
    "We need a fake {term} for the unit tests, something small we control.",
    "The canary for {version} looked clean for {small} hours.",
    "Can someone review my {term} pull request before {day}?",
    "The linter started flagging {num} warnings after the upgrade.",
    # vendors, cost, hiring
    "The {term} vendor quoted {money} a month at our volume.",
    "Self-hosting {term} would cost us an engineer's time every week.",
    "{first} is interviewing {small} candidates for the {team} team.",
    "We have an offer out for a senior engineer on {team}.",
    "The {team} team is down {small} people until {month}.",
    "Onboarding for the new hires starts on {day}.",
    "I'd compare {term} and {term2} on price, lock-in and effort.",
    "{term} has better docs, but {term2} is cheaper at our scale.",
    "The contract with the {term} vendor ends in {month}.",
    "Finance approved the budget for {term} through {month}.",
    "We could negotiate a discount if we commit to {small} years.",
    "Nobody on the team has run {term} in production before.",
    # meeting flow and small talk
    "Okay, I think that's everyone.",
    "Can everyone see my screen?",
    "Sorry, I was on mute.",
    "I'm recording this for the people who couldn't make it.",
    "Let's go around quickly, starting with {first}.",
    "Any objections before we move on?",
    "I'll follow up with {first} after the call.",
    "We're over time, so let's take the rest to the channel.",
    "Thanks, {first}, that was really clear.",
    "Can you repeat that? You cut out for a second.",
    "Good question, I don't know the answer yet.",
    "Let me check and get back to you by {day}.",
    "That's a fair point, I hadn't thought about {term}.",
    "I'm walking back from lunch, so if I drop, that's why.",
    "Happy {day}, everybody.",
    "Next item on the agenda is the {service}.",
    "Let's park that and come back to it next week.",
    "To summarise: {first} owns {term}, and {first2} owns the {service}.",
    "Decision: we go with {term} and revisit in {month}.",
    "Action item for {first}: write the {term} runbook.",
    "Does anyone have anything else?",
    "I'll share the notes and the recording in the channel.",
    # questions
    "What happens to existing sessions when we flip the {term} flag?",
    "Why did the {service} need a restart after the deploy?",
    "How long would it take to move {customer} to {term}?",
    "Who else depends on the {service} today?",
    "Is {term} supported in {region} yet?",
    "Did we ever decide what to do about {ticket}?",
    "Can the {service} survive losing {region} entirely?",
    "What's the rollback plan if {term} misbehaves?",
    "Are we sure the {metric} numbers include {region}?",
    "When was the last time anyone tested the {term} restore?",
    "Would {term2} have prevented this outage?",
    "How many customers still use the old {service}?",
    "Is the {term} limit per tenant or global?",
    "Should the {team} team review the {service} changes?",
    # opinions and trade-offs
    "Honestly, {term} feels like overkill for {num} users.",
    "I'm worried that {term} adds another thing to page us at night.",
    "The simplest option is to keep the {service} as it is for now.",
    "{term} would lock us in, and that matters more than the price.",
    "I like {term2} because the team already knows it.",
    "We keep paying for the {term} decision we made two years ago.",
    "The risk with {term} is the migration, not the steady state.",
    "I'd rather be boring here and use {term}.",
    "If {customer} is the only one asking, it can wait until {month}.",
    "This is a two-way door, so let's just try {term} in staging.",
    "The {service} is the part I'd least like to rewrite.",
    "I don't think the {metric} regression is related to {term}.",
    "My gut says it's the {term}, but I haven't proven it.",
    "It's not worth optimising the {service} below {ms} milliseconds.",
)
OPENERS = ("So, ", "Okay, ", "Right, ", "Yeah, ", "Honestly, ", "Also, ", "And ", "But ")
TAILS = (
    ", as far as I know",
    ", at least in {region}",
    ", according to {first}",
    " this time",
    ", if that helps",
    " for {customer} at least",
)
_FIELD = re.compile(r"\{(\w+)\}")


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class Talk:
    """A seeded source of names and sentences."""

    def __init__(self, seed: int | str) -> None:
        self.rng = random.Random(seed)
        self.cast: list[str] = [self.person() for _ in range(6)]

    def person(self) -> str:
        """A full name, e.g. "Priya Raman"."""
        return f"{self.rng.choice(FIRST)} {self.rng.choice(LAST)}"

    def _value(self, field: str) -> str:
        r = self.rng
        values = {
            "name": lambda: r.choice(self.cast),
            "first": lambda: r.choice(self.cast).split()[0],
            "term": lambda: r.choice(TERMS),
            "service": lambda: r.choice(SERVICES),
            "team": lambda: r.choice(TEAMS),
            "metric": lambda: r.choice(METRICS),
            "customer": lambda: r.choice(CUSTOMERS),
            "region": lambda: r.choice(REGIONS),
            "day": lambda: r.choice(WEEKDAYS),
            "month": lambda: r.choice(MONTHS),
            "num": lambda: f"{r.choice((1, 2, 5, 10, 20, 50)) * r.randint(2, 99):,}",
            "small": lambda: str(r.randint(2, 12)),
            "pct": lambda: str(r.choice((r.randint(10, 99), r.randint(90, 99)))),
            "ms": lambda: str(r.choice((r.randint(8, 90), r.randint(100, 900)))),
            "money": lambda: f"${r.randint(1, 40)}.{r.randint(0, 9)}k",
            "version": lambda: f"v{r.randint(1, 4)}.{r.randint(0, 30)}.{r.randint(0, 9)}",
            "ticket": lambda: (
                f"{r.choice(('AUTH', 'PLAT', 'PAY', 'SRCH', 'OPS'))}-{r.randint(100, 999)}"
            ),
            "clock": lambda: f"{r.randint(0, 23):02d}:{r.choice((0, 5, 15, 30, 41, 47)):02d}",
            "nth": lambda: _ordinal(r.randint(1, 28)),
        }
        base = field.rstrip("2")
        return values[base]()

    def fill(self, template: str) -> str:
        """``template`` with each ``{field}`` replaced (``{term2}`` differs from ``{term}``)."""
        seen: dict[str, str] = {}

        def one(match: re.Match[str]) -> str:
            field = match[1]
            if field not in seen:
                value = self._value(field)
                for _ in range(5):
                    if value != seen.get(field.rstrip("2")):
                        break
                    value = self._value(field)
                seen[field] = value
            return seen[field]

        return _FIELD.sub(one, template)

    def sentence(self) -> str:
        """One sentence, with an occasional opener or tail."""
        text = self.fill(self.rng.choice(TEMPLATES))
        opener = self.rng.choice(OPENERS) if self.rng.random() < 0.3 else ""
        if opener and text[1:2].islower() and text.split()[0] not in FIRST:
            text = text[0].lower() + text[1:]
        if text.endswith(".") and self.rng.random() < 0.15:
            tail = self.fill(self.rng.choice(TAILS))
            text = text[:-1] + tail + "."
        return opener + text


@dataclass(frozen=True)
class Line:
    """One timed sentence of a meeting."""

    start_s: float
    end_s: float
    speaker: str
    text: str


def meeting(talk: Talk, minutes: float) -> list[Line]:
    """A conversation of ``minutes``: turns of 1-4 sentences at ~150 words a minute."""
    rng = talk.rng
    lines: list[Line] = []
    speakers = talk.cast[: rng.randint(3, 6)]
    t = rng.uniform(0.0, 2.0)
    speaker = speakers[0]
    while t < minutes * 60:
        for _ in range(rng.choice((1, 1, 2, 2, 3, 4))):
            text = talk.sentence()
            duration = max(1.0, len(text.split()) / rng.uniform(2.2, 2.8))
            lines.append(Line(t, t + duration, speaker, text))
            t += duration + rng.uniform(0.1, 0.5)
        speaker = rng.choice([s for s in speakers if s != speaker])
        t += rng.uniform(0.2, 1.5)
    return lines


def _clock(seconds: float, millis: bool) -> str:
    whole = int(seconds)
    text = f"{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}"
    return f"{text}.{int((seconds - whole) * 1000):03d}" if millis else text


def to_vtt(lines: list[Line]) -> str:
    """WebVTT with one cue per sentence and ``<v Name>`` voice tags."""
    cues = [
        f"{_clock(x.start_s, True)} --> {_clock(x.end_s, True)}\n<v {x.speaker}>{x.text}</v>"
        for x in lines
    ]
    return "WEBVTT\n\n" + "\n\n".join(cues) + "\n"


def to_transcript(lines: list[Line]) -> str:
    """``[hh:mm:ss] Speaker: text``, one line per turn."""
    out: list[str] = []
    prev: str | None = None
    for x in lines:
        if x.speaker == prev:
            out[-1] += " " + x.text
        else:
            out.append(f"[{_clock(x.start_s, False)}] {x.speaker}: {x.text}")
        prev = x.speaker
    return "\n".join(out) + "\n"


def meeting_title(talk: Talk) -> str:
    """A title like "Auth service sync" or "Kafka retro"."""
    rng = talk.rng
    subject = rng.choice((*SERVICES, *TERMS))
    kind = rng.choice(("sync", "retro", "design review", "planning", "deep dive", "kickoff"))
    return f"{subject[:1].upper()}{subject[1:]} {kind}"


def meeting_date(talk: Talk, start: date = date(2023, 1, 2), days: int = 720) -> date:
    """A weekday in the two years from ``start``."""
    d = start + timedelta(days=talk.rng.randrange(days))
    return d - timedelta(days=max(0, d.weekday() - 4))
