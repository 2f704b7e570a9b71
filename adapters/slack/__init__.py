"""Quorum on Slack: ``app`` (Bolt listeners, the thread reply), ``render`` (mrkdwn and
Block Kit within Slack's limits)."""

from adapters.platform import Platform

PLATFORM = Platform(
    name="slack",
    configured=lambda s: s.slack_bot_token is not None,
    needs="SLACK_BOT_TOKEN (and SLACK_APP_TOKEN or SLACK_SIGNING_SECRET)",
    runner="adapters.slack.app:run_slack",
)
