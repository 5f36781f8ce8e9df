package queue

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TopicName is the full resource name of topic id in the client's project.
func (c *Client) TopicName(id string) string {
	return fmt.Sprintf("projects/%s/topics/%s", c.ps.Project(), id)
}

// SubscriptionName is the full resource name of subscription id.
func (c *Client) SubscriptionName(id string) string {
	return fmt.Sprintf("projects/%s/subscriptions/%s", c.ps.Project(), id)
}

// Probe checks within callTimeout that Pub/Sub answers; any answer will do
// (asking for a topic that need not exist). The error names the endpoint.
func (c *Client) Probe(ctx context.Context) error { return c.probe(ctx, callTimeout) }

func (c *Client) probe(ctx context.Context, d time.Duration) error {
	ctx, cancel := withTimeout(ctx, d)
	defer cancel()
	_, err := c.ps.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: c.TopicName("ferry-probe")})
	if err == nil {
		c.report(nil)
		return nil
	}
	if err = c.fail(ctx, "probe", err); unreachable(ctx, err) {
		return err
	}
	return nil // NotFound, PermissionDenied…: Pub/Sub answered
}

// EnsureTopic creates topic id unless it exists.
func (c *Client) EnsureTopic(ctx context.Context, id string) error {
	ctx, cancel := withTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: c.TopicName(id)})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return c.fail(ctx, "create topic "+id, err)
	}
	return nil
}

// DeleteTopic removes topic id; a missing one is not an error.
func (c *Client) DeleteTopic(ctx context.Context, id string) error {
	ctx, cancel := withTimeout(ctx, callTimeout)
	defer cancel()
	err := c.ps.TopicAdminClient.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: c.TopicName(id)})
	if err != nil && status.Code(err) != codes.NotFound {
		return c.fail(ctx, "delete topic "+id, err)
	}
	return nil
}

// Subscription describes a subscription to create.
type Subscription struct {
	ID, Topic   string
	AckDeadline time.Duration
	// DeadLetterTopic, when set, receives messages after MaxAttempts
	// deliveries (5 to 100).
	DeadLetterTopic string
	MaxAttempts     int
	// ExpireAfter, when set, deletes the subscription after that long
	// without use (at least a day on Google Cloud); temporary waiters use it.
	ExpireAfter time.Duration
	// MinBackoff, when set, replaces the redelivery backoff's minimum of
	// 1 s (tests of nacks use 0).
	MinBackoff time.Duration
}

// EnsureSubscription creates the subscription unless it exists.
func (c *Client) EnsureSubscription(ctx context.Context, s Subscription) error {
	ctx, cancel := withTimeout(ctx, callTimeout)
	defer cancel()
	minBackoff := time.Second
	if s.MinBackoff > 0 {
		minBackoff = s.MinBackoff
	}
	pb := &pubsubpb.Subscription{
		Name:                      c.SubscriptionName(s.ID),
		Topic:                     c.TopicName(s.Topic),
		AckDeadlineSeconds:        int32(s.AckDeadline / time.Second),
		RetryPolicy:               &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(minBackoff), MaximumBackoff: durationpb.New(60 * time.Second)},
		EnableExactlyOnceDelivery: false,
	}
	if s.DeadLetterTopic != "" {
		pb.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{
			DeadLetterTopic:     c.TopicName(s.DeadLetterTopic),
			MaxDeliveryAttempts: int32(s.MaxAttempts),
		}
	}
	if s.ExpireAfter > 0 {
		pb.ExpirationPolicy = &pubsubpb.ExpirationPolicy{Ttl: durationpb.New(s.ExpireAfter)}
	}
	_, err := c.ps.SubscriptionAdminClient.CreateSubscription(ctx, pb)
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return c.fail(ctx, fmt.Sprintf("create subscription %s on %s", s.ID, s.Topic), err)
	}
	return nil
}

// DeleteSubscription removes subscription id; a missing one is not an error.
func (c *Client) DeleteSubscription(ctx context.Context, id string) error {
	ctx, cancel := withTimeout(ctx, callTimeout)
	defer cancel()
	err := c.ps.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: c.SubscriptionName(id)})
	if err != nil && status.Code(err) != codes.NotFound {
		return c.fail(ctx, "delete subscription "+id, err)
	}
	return nil
}
