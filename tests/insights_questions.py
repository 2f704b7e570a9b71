"""A labelled set for grouping questions by meaning: 10 topics a team asks about, 7 ways
each, written by hand for the test (paraphrases share few words on purpose, and some
topics are neighbours: on-call and incidents, vacation and sick leave, backups and the
database migration)."""

from __future__ import annotations

QUESTIONS: dict[str, list[str]] = {
    "oncall": [
        "Who is on call this weekend?",
        "How does the on-call rota work?",
        "what's the pager rotation schedule",
        "When is my next on-call shift?",
        "Who do I page if production breaks at night?",
        "Is there an on-call rotation for the platform team?",
        "how do we swap on-call shifts",
    ],
    "vacation": [
        "How many vacation days do we get?",
        "What is the holiday allowance per year?",
        "how do I request time off",
        "Can unused vacation days roll over to next year?",
        "Where do I book my annual leave?",
        "what's the PTO policy",
        "Do I need approval before taking holidays?",
    ],
    "sick": [
        "What do I do when I'm sick?",
        "Do I need a doctor's note for sick leave?",
        "how many sick days are allowed",
        "Who should I tell if I'm ill and can't work today?",
        "Is sick leave paid?",
        "what is the policy for calling in sick",
        "Can I work from home when I have a cold instead of taking a sick day?",
    ],
    "vpn": [
        "How do I set up the VPN?",
        "The VPN client won't connect, what should I do?",
        "which VPN config do I use from home",
        "How do I get VPN access on a new laptop?",
        "Where can I download the VPN profile?",
        "vpn keeps disconnecting every few minutes",
        "Do I need the VPN to reach the staging cluster?",
    ],
    "expenses": [
        "How do I file an expense report?",
        "Where do I submit receipts for reimbursement?",
        "what's the limit for meal expenses on a business trip",
        "How long until expenses are reimbursed?",
        "Can I expense a conference ticket?",
        "who approves expense claims",
        "how to get paid back for a taxi to the client",
    ],
    "auth0": [
        "Why are we moving off Auth0?",
        "When does the Auth0 to Keycloak migration happen?",
        "what is the plan for replacing Auth0",
        "Which identity provider replaces Auth0?",
        "How will login work after the Keycloak cut-over?",
        "what were the risks of the identity provider migration",
        "Who owns the Keycloak rollout?",
    ],
    "backups": [
        "How often is the database backed up?",
        "Where are the backups stored?",
        "how do I restore a backup of postgres",
        "What is our backup retention period?",
        "Have we tested restoring from backups recently?",
        "are database snapshots encrypted",
        "Who gets alerted when a nightly backup fails?",
    ],
    "hiring": [
        "How many engineers are we hiring next quarter?",
        "What roles are open on the team?",
        "who is on the interview panel for backend candidates",
        "What does the hiring plan for Q3 look like?",
        "How do I refer a friend for an open position?",
        "what is the interview process for new engineers",
        "Is there a headcount freeze?",
    ],
    "office": [
        "When are we moving to the new office?",
        "What is the address of the new office?",
        "will there be parking at the new building",
        "Which floor is our team on after the move?",
        "How do I get a badge for the new office?",
        "is the office move still planned for March",
        "What happens to our desks during the office move?",
    ],
    "deploy": [
        "When is the deploy freeze for the holidays?",
        "Can I ship to production during the code freeze?",
        "how long does the release freeze last in December",
        "Who can approve an exception to the deploy freeze?",
        "Are hotfixes allowed during the freeze?",
        "what dates is deployment frozen over new year",
        "Does the change freeze apply to config changes too?",
    ],
}
