"""The shop's handlers, found by ``manage.py pgbeat_worker`` in this installed app."""

from shop.models import Order

from pgbeat.contrib.django import registry


@registry.handler("order_confirmation")
def send_confirmation(payload: dict[str, int]) -> None:
    Order.objects.filter(id=payload["order_id"]).update(confirmed=True)
