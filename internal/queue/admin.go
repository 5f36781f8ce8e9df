package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/iam/apiv1/iampb"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TopicName is the full resource name of topic id in the client's project.
func (c *Client) TopicName(id string) string {
	return fmt.Sprintf("projects/%s/topics/%s", c.project(), id)
}

// project is the client's project; the in-process transport has none.
func (c *Client) project() string { return c.d.project() }

func (d *pubsubDriver) project() string { return d.ps.Project() }

// SubscriptionName is the full resource name of subscription id.
func (c *Client) SubscriptionName(id string) string {
	return fmt.Sprintf("projects/%s/subscriptions/%s", c.project(), id)
}

// Probe checks within callTimeout that Pub/Sub answers; any answer will do
// (asking for a topic that need not exist). The error names the endpoint.
func (c *Client) Probe(ctx context.Context) error { return c.d.probe(ctx, callTimeout) }

func (d *pubsubDriver) probe(ctx context.Context, timeout time.Duration) error {
	c := d.c
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	_, err := d.ps.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: c.TopicName("ferry-probe")})
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
	return c.d.ensureTopic(ctx, id)
}

func (d *pubsubDriver) ensureTopic(ctx context.Context, id string) error {
	c := d.c
	ctx, cancel := withTimeout(ctx, callTimeout)
	defer cancel()
	_, err := d.ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: c.TopicName(id)})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return c.fail(ctx, "create topic "+id, err)
	}
	return nil
}

// DeleteTopic removes topic id; a missing one is not an error.
func (c *Client) DeleteTopic(ctx context.Context, id string) error {
	return c.d.deleteTopic(ctx, id)
}

func (d *pubsubDriver) deleteTopic(ctx context.Context, id string) error {
	c := d.c
	ctx, cancel := withTimeout(ctx, callTimeout)
	defer cancel()
	err := d.ps.TopicAdminClient.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: c.TopicName(id)})
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
	return c.d.ensureSubscription(ctx, s)
}

func (d *pubsubDriver) ensureSubscription(ctx context.Context, s Subscription) error {
	c := d.c
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
	_, err := d.ps.SubscriptionAdminClient.CreateSubscription(ctx, pb)
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return c.fail(ctx, fmt.Sprintf("create subscription %s on %s", s.ID, s.Topic), err)
	}
	return nil
}

// DeleteSubscription removes subscription id; a missing one is not an error.
func (c *Client) DeleteSubscription(ctx context.Context, id string) error {
	return c.d.deleteSubscription(ctx, id)
}

func (d *pubsubDriver) deleteSubscription(ctx context.Context, id string) error {
	c := d.c
	ctx, cancel := withTimeout(ctx, callTimeout)
	defer cancel()
	err := d.ps.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: c.SubscriptionName(id)})
	if err != nil && status.Code(err) != codes.NotFound {
		return c.fail(ctx, "delete subscription "+id, err)
	}
	return nil
}

// errNoSettings answers the calls that inspect a deployment's topics and
// subscriptions (producer doctor's) on the in-process transport.
var errNoSettings = errors.New(memEndpoint + " keeps no settings or permissions to inspect")

// ErrNotFound: the topic or subscription does not exist.
var ErrNotFound = errors.New("not found")

// ErrDenied: the caller may not do what it asked.
var ErrDenied = errors.New("permission denied")

// describeErr maps what an admin call answered onto ErrNotFound and
// ErrDenied, keeping the text.
func (c *Client) describeErr(ctx context.Context, op string, err error) error {
	switch status.Code(err) {
	case codes.NotFound:
		return fmt.Errorf("%s: %w: %v", op, ErrNotFound, err)
	case codes.PermissionDenied:
		return fmt.Errorf("%s: %w: %v", op, ErrDenied, err)
	}
	return c.fail(ctx, op, err)
}

// TopicKMSKey returns the Cloud KMS key topic id encrypts its messages
// with ("" for a Google-managed key), or an error wrapping ErrNotFound
// when the topic does not exist. Safe for concurrent use; not retried.
func (c *Client) TopicKMSKey(ctx context.Context, id string) (string, error) {
	return c.d.topicKMSKey(ctx, id)
}

func (d *pubsubDriver) topicKMSKey(ctx context.Context, id string) (string, error) {
	c := d.c
	ctx, cancel := withTimeout(ctx, callTimeout)
	defer cancel()
	t, err := d.ps.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: c.TopicName(id)})
	if err != nil {
		return "", c.describeErr(ctx, "get topic "+id, err)
	}
	return t.GetKmsKeyName(), nil
}

// SubscriptionInfo is what ferry relies on of an existing subscription.
type SubscriptionInfo struct {
	// Topic and DeadLetterTopic are ids in the client's project ("" for a
	// topic of another project or none).
	Topic, DeadLetterTopic string
	MaxAttempts            int
}

// DescribeSubscription returns what subscription id receives from and
// where it dead-letters, or an error wrapping ErrNotFound or ErrDenied.
// Safe for concurrent use; not retried.
func (c *Client) DescribeSubscription(ctx context.Context, id string) (SubscriptionInfo, error) {
	return c.d.describeSubscription(ctx, id)
}

func (d *pubsubDriver) describeSubscription(ctx context.Context, id string) (SubscriptionInfo, error) {
	c := d.c
	ctx, cancel := withTimeout(ctx, callTimeout)
	defer cancel()
	s, err := d.ps.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: c.SubscriptionName(id)})
	if err != nil {
		return SubscriptionInfo{}, c.describeErr(ctx, "get subscription "+id, err)
	}
	own := func(name string) string {
		if p := c.TopicName(""); strings.HasPrefix(name, p) {
			return strings.TrimPrefix(name, p)
		}
		return ""
	}
	info := SubscriptionInfo{Topic: own(s.GetTopic())}
	if d := s.GetDeadLetterPolicy(); d != nil {
		info.DeadLetterTopic, info.MaxAttempts = own(d.GetDeadLetterTopic()), int(d.GetMaxDeliveryAttempts())
	}
	return info, nil
}

// TestTopicPermissions returns which of perms the caller holds on topic id
// (Pub/Sub's testIamPermissions). Safe for concurrent use; not retried.
func (c *Client) TestTopicPermissions(ctx context.Context, id string, perms []string) ([]string, error) {
	return c.d.testTopicPermissions(ctx, id, perms)
}

func (d *pubsubDriver) testTopicPermissions(ctx context.Context, id string, perms []string) ([]string, error) {
	c := d.c
	ctx, cancel := withTimeout(ctx, callTimeout)
	defer cancel()
	r, err := d.ps.TopicAdminClient.TestIamPermissions(ctx, &iampb.TestIamPermissionsRequest{Resource: c.TopicName(id), Permissions: perms})
	if err != nil {
		return nil, c.describeErr(ctx, "test permissions on topic "+id, err)
	}
	return r.GetPermissions(), nil
}
