select * from (values (1, 'ann', 10.0), (2, 'bob', 20.0), (3, 'ann', 5.0)) as t(order_id, customer, amount)
