"""Quorum on Slack: ``app`` (Bolt listeners, the thread reply), ``render`` (mrkdwn and
Block Kit within Slack's limits), ``settings``, ``doctor``, ``post``."""

from adapters.platform import Platform
from adapters.slack.settings import SlackSettings, events_path

PLATFORM = Platform(
    name="slack",
    settings=SlackSettings,
    configured=lambda s: s.bot_token is not None,
    needs="SLACK_BOT_TOKEN (and SLACK_APP_TOKEN or SLACK_SIGNING_SECRET)",
    runner="adapters.slack.events:run_slack",
    doctor="adapters.slack.doctor:check_slack",
    poster="adapters.slack.post:post_to_slack",
    webhook=events_path,
)
