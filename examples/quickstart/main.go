// Command quickstart defines three function tools — one that needs a secret
// variable, one that queues another tool, one that returns an attachment —
// runs them as a batch on a thread, and prints the stored messages.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/toolrun/toolrun"
)

// LookupArgs are the arguments of lookup_customer.
type LookupArgs struct {
	CustomerID string `json:"customerId" jsonschema:"description=Customer ID"`
}

// LookupCustomer reads a customer record with a secret API key.
var LookupCustomer = &toolrun.Func[LookupArgs]{
	Name:        "lookup_customer",
	Description: "Look up customer by ID",
	Variables: []toolrun.Variable{{
		Name: "CRM_API_KEY", Type: toolrun.VarSecret, Required: true,
		Description: "Key of the CRM API",
	}},
	Execute: func(ctx context.Context, s toolrun.ThreadState, a LookupArgs) (toolrun.Result, error) {
		key, err := s.Env(ctx, "CRM_API_KEY") // present: checked before Execute
		if err != nil {
			return toolrun.Result{}, err
		}
		if a.CustomerID != "c-42" {
			// The key leaks into the error text here; toolrun redacts it.
			return toolrun.Errorf("customer %s not found (queried with key %s)", a.CustomerID, key), nil
		}
		return toolrun.JSON(map[string]string{"id": a.CustomerID, "name": "Ada Lovelace"}), nil
	},
}

// OrderArgs are the arguments of process_order.
type OrderArgs struct {
	OrderID string `json:"orderId" jsonschema:"description=Order ID"`
	Notify  bool   `json:"notify,omitempty" jsonschema:"default=true"`
}

// ProcessOrder validates an order and queues the confirmation e-mail.
var ProcessOrder = &toolrun.Func[OrderArgs]{
	Name:        "process_order",
	Description: "Process order and queue follow-up tasks",
	Uses:        []string{"send_confirmation_email"},
	Execute: func(ctx context.Context, s toolrun.ThreadState, a OrderArgs) (toolrun.Result, error) {
		if a.Notify {
			if err := s.QueueTool("send_confirmation_email", map[string]string{"orderId": a.OrderID}); err != nil {
				return toolrun.Result{}, err
			}
		}
		return toolrun.Text("Order " + a.OrderID + " queued for processing"), nil
	},
}

// EmailArgs are the arguments of send_confirmation_email.
type EmailArgs struct {
	OrderID string `json:"orderId"`
}

// SendConfirmation pretends to send an e-mail.
var SendConfirmation = &toolrun.Func[EmailArgs]{
	Name:        "send_confirmation_email",
	Description: "Send the order confirmation e-mail",
	Execute: func(ctx context.Context, s toolrun.ThreadState, a EmailArgs) (toolrun.Result, error) {
		return toolrun.Text("Confirmation sent for " + a.OrderID), nil
	},
}

// ChartArgs are the arguments of render_chart.
type ChartArgs struct {
	Title string `json:"title"`
}

// RenderChart returns an SVG file as an attachment.
var RenderChart = &toolrun.Func[ChartArgs]{
	Name:        "render_chart",
	Description: "Render a bar chart",
	Execute: func(ctx context.Context, s toolrun.ThreadState, a ChartArgs) (toolrun.Result, error) {
		svg := `<svg xmlns="http://www.w3.org/2000/svg"><text y="20">` + a.Title + `</text></svg>`
		return toolrun.Result{
			Status: toolrun.StatusSuccess,
			Result: "Rendered " + a.Title,
			Attachments: []toolrun.Attachment{{
				Name: "chart.svg", MimeType: "image/svg+xml", Data: []byte(svg),
			}},
		}, nil
	},
}

func main() {
	ctx := context.Background()
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(LookupCustomer, ProcessOrder, SendConfirmation, RenderChart); err != nil {
		log.Fatal(err)
	}
	store, cleanup := openStore()
	defer cleanup()
	ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{
		Store: store,
		Env:   map[string]toolrun.EnvValue{"CRM_API_KEY": {Value: "crm-secret-123", Type: toolrun.VarSecret}},
	})

	// The calls a model issued in one response, in order.
	calls := []toolrun.ToolCall{
		{ID: "call_1", Name: "lookup_customer", Arguments: `{"customerId":"c-42"}`},
		{ID: "call_2", Name: "process_order", Arguments: `{"orderId":"o-7"}`},
		{ID: "call_3", Name: "lookup_customer", Arguments: `{"customerId":"c-99"}`},
		{ID: "call_4", Name: "render_chart", Arguments: `{"title":"Sales"}`},
		{ID: "call_5", Name: "lookup_customer", Arguments: `{"customerId":`},
	}
	if _, err := ex.Run(ctx, "thread-1", calls); err != nil {
		log.Fatal(err)
	}

	page, err := store.ListMessages(ctx, "thread-1", toolrun.MessageQuery{})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range page.Messages {
		fmt.Printf("[%s] %s (%s, %s)\n  %s\n", m.Role, m.Name, m.ToolCallID, m.ToolStatus, strings.ReplaceAll(m.Content, "\n", "\n  "))
	}
}
