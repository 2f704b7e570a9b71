"""Build examples/docs/auth-migration-plan.pdf, the sample archive's PDF.

Run from the repo root: ``.venv/bin/python examples/make_pdf.py``. Needs fpdf2 (a dev
dependency). Core fonts only, so every string here must be latin-1. The output is
deterministic: seven pages, one topic per page, so a search can cite the right page.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from fpdf import FPDF

OUT = Path(__file__).resolve().parent / "docs" / "auth-migration-plan.pdf"
TITLE = "Auth migration plan: Auth0 to AWS Cognito"


class Plan(FPDF):
    def header(self) -> None:
        self.set_font("Helvetica", "I", 8)
        self.set_text_color(110, 110, 110)
        self.cell(0, 5, "Northwind Engineering - auth migration plan v1.2 (2024-02-08)", align="R")
        self.ln(9)
        self.set_text_color(0, 0, 0)

    def footer(self) -> None:
        self.set_y(-14)
        self.set_font("Helvetica", "I", 8)
        self.set_text_color(110, 110, 110)
        self.cell(0, 5, f"Internal. Page {self.page_no()} of {{nb}}", align="C")
        self.set_text_color(0, 0, 0)

    def h1(self, text: str) -> None:
        self.set_font("Helvetica", "B", 16)
        self.multi_cell(0, 8, text, align="L")
        self.ln(2)

    def h2(self, text: str) -> None:
        self.ln(1)
        self.set_font("Helvetica", "B", 12)
        self.multi_cell(0, 6.5, text, align="L")
        self.ln(1)

    def para(self, text: str) -> None:
        self.set_font("Helvetica", "", 10)
        self.multi_cell(0, 5, text, align="L")
        self.ln(1.5)

    def bullets(self, items: list[str]) -> None:
        self.set_font("Helvetica", "", 10)
        for item in items:
            self.set_x(self.l_margin + 4)
            self.multi_cell(0, 5, item if item[:1].isdigit() else "- " + item, align="L")
            self.ln(0.8)
        self.ln(1)

    def table(self, widths: list[float], rows: list[list[str]]) -> None:
        for i, row in enumerate(rows):
            self.set_font("Helvetica", "B" if i == 0 else "", 9)
            with_fill = i == 0
            if with_fill:
                self.set_fill_color(225, 230, 240)
            # Row height: the tallest wrapped cell.
            lines = max(
                len(self.multi_cell(w - 1.6, 4.6, txt, align="L", dry_run=True, output="LINES"))
                for w, txt in zip(widths, row, strict=True)
            )
            h = 4.6 * lines + 1.6
            x0, y0 = self.get_x(), self.get_y()
            for w, txt in zip(widths, row, strict=True):
                x, y = self.get_x(), self.get_y()
                self.rect(x, y, w, h, style="DF" if with_fill else "D")
                self.set_xy(x + 0.8, y + 0.8)
                self.multi_cell(w - 1.6, 4.6, txt, align="L")
                self.set_xy(x + w, y)
            self.set_xy(x0, y0 + h)
        self.ln(3)

    def mono(self, text: str) -> None:
        self.set_font("Courier", "", 8.5)
        self.multi_cell(0, 4.2, text, align="L")
        self.ln(2)


def box(title: str, lines: list[str], width: int) -> list[str]:
    """A plain-text box, ``width`` characters wide, for the Courier diagram."""
    top = "+-- " + title + " "
    out = [top + "-" * (width - len(top) - 1) + "+"]
    out += ["| " + line.ljust(width - 4) + " |" for line in lines]
    out.append("+" + "-" * (width - 2) + "+")
    return out


def diagram() -> str:
    us = box("northwind-prod-us (us-east-1)", [
        "app clients: northwind-web (PKCE)",
        "             northwind-api-internal",
        "triggers: northwind-migrate-user",
        "          northwind-pre-token",
        "domain: login.northwind.example",
    ], 41)
    eu = box("northwind-prod-eu (eu-central-1)", [
        "same clients and triggers",
        "EU users' data stays in the EU",
        "domain: login-eu.northwind.example",
    ], 41)
    eu += [""] * (len(us) - len(eu))
    pools = ["  " + a + "  " + b for a, b in zip(us, eu, strict=True)]
    return "\n".join([
        "  browser --> login.northwind.example (React, CloudFront + S3)",
        "     |  1. email first: home realm discovery by email domain (SSO users),",
        "     |     or HMAC(email) lookup in DynamoDB table auth-user-routing",
        "     |  2. per-org flag auth_provider = auth0 | cognito (config service)",
        "     v",
        *[line.rstrip() for line in pools],
        "     |  tokens: access 60 min, ID 60 min, refresh 30 days",
        "     v",
        "  session-service (httpOnly cookie, refresh) --> 7 APIs verifying JWTs with nw-jwt",
    ])


def build() -> Plan:
    pdf = Plan(format="A4")
    pdf.set_auto_page_break(auto=True, margin=16)
    pdf.set_margins(18, 12, 18)
    pdf.set_title(TITLE)
    pdf.set_author("John Park")
    pdf.set_subject("AUTH-412: migrate Northwind login from Auth0 to AWS Cognito")
    pdf.set_creation_date(datetime(2024, 2, 8, 9, 0, tzinfo=UTC))
    pdf.alias_nb_pages()

    # Page 1: summary
    pdf.add_page()
    pdf.h1(TITLE)
    pdf.para(
        "Owner: John Park (staff engineer, auth). Approvers: Priya Raman (engineering manager), "
        "Dana Kim (security). Contributors: Marcus Lee (SRE), Sofia Alvarez (product). "
        "Status: approved at the migration review on 2024-02-06. Epic: AUTH-412."
    )
    pdf.h2("1. Summary: why we are leaving Auth0")
    pdf.para(
        "We are moving Northwind's login from Auth0 to AWS Cognito. Three problems, taken together, "
        "make staying on Auth0 the more expensive and riskier option:"
    )
    pdf.bullets([
        "Cost. Our Auth0 bill was about $2,100 per month through 2023. The renewal quote received in "
        "December 2023 is $9,800 per month. We crossed 12,000 monthly active users (MAU) in November, "
        "and with 19 enterprise SSO connections Auth0 moves us onto its Enterprise plan, which is priced "
        "per MAU with a high floor. It is the enterprise SSO connection pricing that drives the jump. "
        "The contract renews on 2024-03-31.",
        "Reliability. On 2024-01-04 an Auth0 outage in the US region blocked every new login and every "
        "token refresh for 40 minutes. Existing sessions kept working; about 200 support tickets arrived "
        "by lunchtime. We had no lever to pull: the status page said 'investigating' for 25 minutes.",
        "Rate limits. The Auth0 Management API is limited to 2 requests per second on our plan. The "
        "nightly bulk user and role sync takes over 90 minutes for 12,000 users and regularly fails on "
        "HTTP 429. In December 2023 half of Hallberg Logistics' 800 new users had no roles for a day.",
    ])
    pdf.para(
        "Secondary reasons: Auth0 Rules and Hooks reach end of life in November 2024, so our 14 Rules "
        "must be rewritten as Actions anyway; Hallberg Logistics and two other EU customers require EU "
        "data residency, which on Auth0 means a second tenant and a second contract; and the custom "
        "domain (login.northwind.example) is a paid add-on on the Enterprise plan."
    )
    pdf.h2("2. Decision")
    pdf.para(
        "AWS Cognito, decided at the design deep dive on 2024-01-23 after a two-week spike. Keycloak "
        "(self-hosted) and Clerk were evaluated and rejected; see page 2. Users move by lazy migration "
        "through the northwind-migrate-user Lambda, because Auth0 password hashes cannot be exported "
        "easily and Cognito cannot import them."
    )
    pdf.h2("3. Key dates")
    pdf.table([45, 129], [
        ["Date", "Milestone"],
        ["2024-02-13", "Internal Northwind org moves to Cognito"],
        ["2024-02-20", "Friendly customers move: Ferrow Analytics, Bluepeak, Osterman Foods"],
        ["2024-02-22", "Go/no-go meeting (afternoon)"],
        ["2024-02-24 06:00 UTC", "Cut-over: all orgs except SSO stragglers"],
        ["2024-03-24", "Dual-run window ends; last day a rollback to Auth0 is possible"],
        ["2024-03-31", "Auth0 contract ends"],
    ])

    # Page 2: cost comparison
    pdf.add_page()
    pdf.h1("4. Cost comparison")
    pdf.para(
        "Monthly cost at today's scale: 12,000 MAU, of which about 3,000 sign in through one of the 19 "
        "enterprise SSO connections (15 SAML, 4 OIDC). Prices are list prices as of January 2024 "
        "unless noted; Cognito figures include advanced security features (ASF) for every MAU."
    )
    pdf.table([44, 30, 100], [
        ["Option", "Per month", "How the number is made"],
        ["Auth0, 2023 plan", "$2,100", "What we paid for most of 2023, below the Enterprise threshold."],
        ["Auth0, renewal quote", "$9,800", "Enterprise plan forced by 19 enterprise SSO connections at 12k MAU. "
         "Custom domain and EU tenant not included."],
        ["Auth0, counter-offer", "$7,200", "Offered by our account rep in January for a two-year commitment. "
         "Kept as the fallback if the Cognito spike had failed."],
        ["AWS Cognito", "about $645 (budget $1,000)", "Direct sign-in: first 50,000 MAU free. Federation: about "
         "3,000 SSO users x $0.015 = $45. ASF: 12,000 x $0.05 = $600. Provisioned concurrency for the "
         "migration Lambda adds about $70 during the dual-run window only."],
        ["Keycloak, self-hosted", "about $1,200 + 0.5 FTE", "HA cluster, Postgres, backups. The real cost is "
         "people: an on-call stateful Java service, upgrades, clustering. Rejected (ops burden)."],
        ["Clerk", "about $1,900, growing", "Best developer experience, but enterprise SSO is priced per "
         "connection (19 x about $100). Grows with every enterprise deal; EU residency not confirmed. Rejected."],
    ])
    pdf.h2("Annual view")
    pdf.bullets([
        "Auth0 renewal: $9,800 x 12 = $117,600 per year.",
        "Cognito at the $1,000 budget: $12,000 per year. Expected saving: about $105,600 per year.",
        "One-off migration effort: about 6 engineer-weeks (John Park 4, Marcus Lee 1, Dana Kim 1), "
        "partly offset by the Rules to Actions rewrite we no longer need to do.",
    ])
    pdf.h2("Assumptions and sensitivity")
    pdf.para(
        "Cognito stays cheaper than the Auth0 quote up to roughly 150,000 MAU with ASF on. If we turned "
        "ASF off, Cognito would cost about $45 per month at today's scale. Each new enterprise customer "
        "adds roughly $0.015 per federated user per month on Cognito, versus a step change in plan on Auth0."
    )

    # Page 3: architecture
    pdf.add_page()
    pdf.h1("5. Architecture")
    pdf.para(
        "Two production user pools, one per data region. A user's pool is their organisation's region, "
        "which the app already stores. Our own React login page replaces the Auth0 Universal Login page; "
        "the Cognito hosted UI is only used as a pass-through for SSO redirects."
    )
    pdf.mono(diagram())
    pdf.h2("Components")
    pdf.bullets([
        "User pools: sign-in by email, case insensitive; only email is required; custom attributes "
        "custom:org_id and custom:auth0_id (link to the old Auth0 user, needed for support and rollback). "
        "These settings cannot be changed after creation.",
        "northwind-migrate-user: user migration trigger. Handles UserMigration_Authentication (verifies the "
        "password with Auth0's resource owner password grant) and UserMigration_ForgotPassword (looks the "
        "user up through the Management API behind a token bucket). Returns finalUserStatus CONFIRMED and "
        "messageAction SUPPRESS. Runs outside the VPC.",
        "northwind-pre-token: pre token generation trigger (V2 event, requires ASF). Adds org_id and roles "
        "to the access token, replacing the three Auth0 Rules that matter.",
        "nw-jwt: shared verifier. During the dual-run window it accepts Auth0 tokens (aud "
        "https://api.northwind.example) and Cognito access tokens (no aud claim; client_id must be in the "
        "allowed list for the environment). The issuer selects the rules.",
        "SAML: Cognito supports SP-initiated SAML only. IdP-initiated customers (4 of 15) use a bookmark "
        "app pointing at the login page. Tracked in AUTH-418.",
    ])

    # Page 4: migration steps
    pdf.add_page()
    pdf.h1("6. Migration steps")
    pdf.table([30, 110, 34], [
        ["When", "Step", "Owner"],
        ["2024-02-01", "Terraform for both user pools, app clients, custom domains (ACM certificate in "
         "us-east-1 for both pools, as Cognito custom domains use CloudFront).", "John Park"],
        ["2024-02-02", "northwind-migrate-user and northwind-pre-token deployed to staging; log-grep test "
         "in CI fails the build if a test password appears in any log line.", "John Park, Dana Kim"],
        ["2024-02-01 - 02-09", "All 7 services on the new nw-jwt verifier (billing and the export worker last).",
         "John Park"],
        ["2024-02-13", "Internal org switched with auth_provider = cognito.", "John Park"],
        ["2024-02-15 - 02-16", "External pen test of the new login page.", "Dana Kim"],
        ["2024-02-20", "Friendly customers switched: Ferrow Analytics, Bluepeak, Osterman Foods.", "Sofia Alvarez"],
        ["2024-02-21", "Timed rollback rehearsal in staging.", "Marcus Lee"],
        ["2024-02-22", "Go/no-go. Criteria: internal and friendly orgs stable for 2 days; 7 of 7 services on "
         "the new verifier; Cognito quota increase confirmed; runbook reviewed; rollback rehearsed.", "Priya Raman"],
        ["2024-02-24", "Cut-over (run sheet below).", "Marcus Lee (IC)"],
        ["2024-03-04", "ASF moves from audit mode to full function after a week of risk scores.", "Dana Kim"],
        ["2024-03-24", "End of dual-run: disable USER_PASSWORD_AUTH, switch clients to SRP (AUTH-440); "
         "stop the Auth0 nightly sync; Auth0 read-only.", "John Park"],
        ["2024-03-25", "Password reset emails to every user not yet migrated (expected 2,000 to 3,000).",
         "Sofia Alvarez"],
    ])
    pdf.h2("Cut-over run sheet, Saturday 2024-02-24 (UTC)")
    pdf.bullets([
        "05:30 bridge opens (Marcus Lee, John Park; Dana Kim on standby; Priya Raman escalation).",
        "05:45 pre-checks: both pools healthy, provisioned concurrency (20) warm, alarms armed.",
        "06:00 auth_provider set to cognito for all orgs except SSO stragglers.",
        "06:00 to 06:15 watch login and refresh success on the auth-cutover dashboard.",
        "06:15 test logins: one password user per pool, Hallberg test account via bookmark app.",
        "09:00 bridge closes if stable (Hallberg warehouse shifts start logging in at about 09:00).",
    ])

    # Page 5: rollback plan
    pdf.add_page()
    pdf.h1("7. Rollback plan")
    pdf.para(
        "Rollback is possible for one org or for all orgs at any time until the end of the dual-run "
        "window on 2024-03-24. After that date USER_PASSWORD_AUTH is disabled, Auth0 becomes read-only "
        "and there is no rollback. The incident commander may roll back without asking anyone."
    )
    pdf.h2("Triggers (any one is enough)")
    pdf.bullets([
        "Login success below 95% for 10 minutes (baseline on Auth0: 99.2%, wrong passwords included).",
        "Refresh success below 98% for 10 minutes (baseline: 99.9%).",
        "Login p95 latency above 3 seconds for 15 minutes.",
        "Any SSO customer completely unable to log in for more than 15 minutes.",
    ])
    pdf.h2("Procedure")
    pdf.bullets([
        "1. IC announces the rollback in the incident channel and records the time.",
        "2. Set auth_provider = auth0 for the affected orgs (or all). Propagation: about 1 minute.",
        "3. Flush the session cache: sessions hold Cognito refresh tokens that Auth0 cannot use. Affected "
        "users are logged out and sign in again through Auth0.",
        "4. Confirm on the auth-cutover dashboard that logins are going through Auth0 and succeeding.",
        "5. Keep the Auth0 nightly sync running; it keeps Auth0 current during the whole window.",
    ])
    pdf.para("Rehearsed in staging on 2024-02-21: 14 minutes from decision to all logins on Auth0.")
    pdf.h2("What a rollback loses")
    pdf.para(
        "Decision of 2024-02-06 (option A): no password write-back from Cognito to Auth0. Users who "
        "changed or reset their password in Cognito during the window (about 400 per month) get a reset "
        "email from Auth0 after a rollback. The rejected option B was an SQS queue, auth0-writeback, "
        "drained at 1 request per second; it was rejected to keep passwords out of queues. New users are "
        "created in both systems by the invite service, so a rollback never loses a user."
    )

    # Page 6: risks
    pdf.add_page()
    pdf.h1("8. Risks")
    pdf.table([52, 16, 106], [
        ["Risk", "Level", "Mitigation"],
        ["Wrong app client ID in a service's config (4 pools plus the rehearsal pool)", "High",
         "Validate client IDs against the pool at startup. Open: not yet implemented."],
        ["Clock skew between nodes and Cognito with one-hour tokens", "Medium",
         "Add 30 to 60 seconds of leeway to nw-jwt (AUTH-427). Today nw-jwt has zero leeway."],
        ["Refresh becomes a hot path (24x more refreshes than on Auth0)", "Medium",
         "Separate alarm on refresh success; refresh exercised in the rehearsal."],
        ["Auth0 throttles password grants from the Lambda (429 at about 100/s)", "Medium",
         "3 s timeout on the Auth0 call and a clean retry message; real peak is 35 logins/s."],
        ["Cognito throttling (default 120 RPS for user authentication)", "Low",
         "Quota raised to 300 RPS in both regions (approved 2024-02-05)."],
        ["5 second hard limit on Cognito Lambda triggers", "Medium",
         "Provisioned concurrency 20; Lambda outside the VPC; cold start 1.9 s worst case."],
        ["Plaintext password reaches the migration Lambda", "High",
         "Allow-list logging, single-secret IAM role, CI log-grep test, per-username rate limit on failed migrations."],
        ["USER_PASSWORD_AUTH left enabled after the window", "Medium", "AUTH-440, due 2024-03-25, owner John Park."],
        ["Refresh tokens do not rotate in Cognito", "Low", "Token revocation on; httpOnly cookie; ASF on."],
        ["SSO customers not updating ACS URL / entity ID in time", "Medium",
         "Per-org flag: stragglers stay on Auth0 until they are ready (AUTH-418)."],
        ["Pool settings that cannot be changed after creation", "Low",
         "Reviewed before creation; a rebuilt pool changes the SAML entity ID for every customer."],
    ])

    # Page 7: appendix
    pdf.add_page()
    pdf.h1("Appendix A. Configuration values")
    pdf.table([64, 110], [
        ["Setting", "Value"],
        ["User pools", "northwind-prod-us (us-east-1_Nw7rT2kQp), northwind-prod-eu (eu-central-1_Nw4hB9xLm)"],
        ["App clients", "northwind-web (public, PKCE, no secret); northwind-api-internal (client credentials)"],
        ["Auth flows", "ALLOW_USER_PASSWORD_AUTH and ALLOW_REFRESH_TOKEN_AUTH until 2024-03-24; then "
         "ALLOW_USER_SRP_AUTH and ALLOW_REFRESH_TOKEN_AUTH"],
        ["Token validity", "access token 60 min; ID token 60 min; refresh token 30 days; revocation enabled"],
        ["Auth0 token lifetimes (old)", "access token 86,400 s (24 h); rotating refresh tokens, 30-day inactivity"],
        ["Custom domains", "login.northwind.example (US pool), login-eu.northwind.example (EU pool); "
         "ACM certificates in us-east-1"],
        ["SAML", "ACS URL https://login.northwind.example/saml2/idpresponse; entity ID "
         "urn:amazon:cognito:sp:<user pool id>; signing certificate valid 10 years"],
        ["Custom attributes", "custom:org_id, custom:auth0_id"],
        ["northwind-migrate-user", "nodejs20.x, 512 MB, timeout 4 s, Auth0 call timeout 3 s, provisioned "
         "concurrency 20, outside VPC, secret prod/auth/auth0-migration-client"],
        ["northwind-pre-token", "pre token generation V2_0 event, read replica with 60 s cache"],
        ["Routing table", "DynamoDB global table auth-user-routing, key HMAC-SHA256(email), value region"],
        ["Feature flag", "auth_provider per org: auth0 | cognito (config service)"],
        ["nw-jwt", "issuers: Auth0 tenant and both Cognito pools; allowed client IDs per environment; "
         "leeway 0 s (to become 60 s, AUTH-427)"],
        ["Alarms", "login success < 95% over 5 min; refresh success < 98% over 5 min; migration Lambda errors "
         "> 1%; migration Lambda p99 > 3 s"],
        ["Quotas", "Cognito user authentication 300 RPS per pool (default 120)"],
        ["Dashboard", "auth-cutover: login and refresh success by provider, Lambda duration and errors, "
         "Cognito throttles, Auth0 429s"],
        ["Load test (2024-02-01, k6)", "50 logins/s for 30 min: Lambda p50 210 ms, p99 780 ms, login p95 1.1 s, "
         "errors 0.02%; spike to 120/s hit the Cognito default quota"],
    ])
    pdf.h2("Appendix B. Tickets")
    pdf.para(
        "AUTH-412 epic; AUTH-418 SAML metadata and ACS changes per customer; AUTH-427 nw-jwt leeway; "
        "AUTH-440 switch to SRP and disable USER_PASSWORD_AUTH."
    )
    return pdf


def main() -> None:
    pdf = build()
    if pdf.pages_count != 7:
        raise SystemExit(f"expected 7 pages, got {pdf.pages_count}: shorten a page")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(OUT))
    print(f"wrote {OUT} ({pdf.pages_count} pages)")


if __name__ == "__main__":
    main()
