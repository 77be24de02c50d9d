"""The shop's tests, as a Django project writes them (``manage.py test shop``): a task
enqueued in the test's transaction is run in-process by ``pgbeat.testing.drain``."""

from django.db import connection
from django.test import TestCase
from shop.models import Order
from shop.tasks import add, confirm_order

from pgbeat.contrib.django.handlers import registry
from pgbeat.testing import drain


class TaskTests(TestCase):
    def test_a_task_runs_and_reports_its_result(self) -> None:
        order = Order.objects.create(email="a@example.com")
        confirmed = confirm_order.enqueue(order.id)
        summed = add.enqueue(2, 3)
        self.assertEqual(add.get_result(summed.id).status, "READY")
        self.assertEqual(drain(connection, registry), {"done": 2})
        summed.refresh()
        self.assertEqual((summed.status, summed.return_value), ("SUCCESSFUL", 5))
        self.assertEqual(
            confirm_order.get_result(confirmed.id).return_value, {"confirmed": order.id}
        )
        self.assertTrue(Order.objects.get(id=order.id).confirmed)
