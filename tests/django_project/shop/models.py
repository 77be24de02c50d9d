"""An order, confirmed by a pgbeat job."""

from django.db import models


class Order(models.Model):
    email = models.TextField()
    confirmed = models.BooleanField(default=False)
