select customer, sum(amount) as revenue from {{ ref('orders') }} group by customer
